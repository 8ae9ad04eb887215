#include "daemon/service/python_imports.h"

#include <gtest/gtest.h>

namespace ci::daemon {
namespace {

using Modules = std::vector<std::string>;
const Modules kWarm = {"numpy", "pandas", "matplotlib.pyplot"};

TEST(PythonImports, EveryFormOfTheStatementNamesItsTopLevelModule) {
  EXPECT_EQ(ImportedModules("import os"), Modules({"os"}));
  EXPECT_EQ(ImportedModules("import os.path as p, sys, xml.dom.minidom"),
            Modules({"os", "sys", "xml"}));
  EXPECT_EQ(ImportedModules("from collections.abc import Mapping, Sequence as S"),
            Modules({"collections"}));
  EXPECT_EQ(ImportedModules("from json import (\n  dumps,\n  loads)\nimport re"),
            Modules({"json", "re"}));
  EXPECT_EQ(ImportedModules("x = 1; import math; from time import time"),
            Modules({"math", "time"}));
  EXPECT_EQ(ImportedModules("if True:\n    import csv\ndef f():\n  from io import BytesIO"),
            Modules({"csv", "io"}));
  EXPECT_EQ(ImportedModules("import \\\n  pandas"), Modules({"pandas"}));
  EXPECT_EQ(ImportedModules("from . import sibling"), Modules({"."}));
  EXPECT_EQ(ImportedModules("from ..pkg.mod import x"), Modules({"."}));
  EXPECT_EQ(ImportedModules("from __future__ import annotations"), Modules({"__future__"}));
}

TEST(PythonImports, StringsCommentsAndOtherFromsAreNotImports) {
  EXPECT_EQ(ImportedModules("print('import pandas')\n# import numpy\ns = \"from x import y\""),
            Modules());
  EXPECT_EQ(ImportedModules("doc = '''\nimport pandas\n'''\nb = rb'import numpy'"), Modules());
  EXPECT_EQ(ImportedModules("def g():\n    yield from range(3)\ntry:\n  pass\n"
                            "except E as e:\n  raise ValueError() from e"),
            Modules());
  EXPECT_EQ(ImportedModules("s = 'it\\'s'; import os"), Modules({"os"}));
  EXPECT_EQ(ImportedModules("s = 'unterminated\nimport os"), Modules({"os"}));
}

TEST(PythonImports, TheStandardLibraryAloneRunsLean) {
  EXPECT_FALSE(MayImportWarmModules("print(1)", kWarm));
  EXPECT_FALSE(
      MayImportWarmModules("import os, sys, json, math\nfrom collections import Counter\n"
                           "print(Counter('hello'))",
                           kWarm));
  EXPECT_FALSE(MayImportWarmModules("print('import pandas')", kWarm));
  EXPECT_FALSE(MayImportWarmModules("df = 1  # not pandas: print(execute)", kWarm));
}

TEST(PythonImports, AWarmModuleAnotherPackageOrAnotherWayToImportIsWarm) {
  EXPECT_TRUE(MayImportWarmModules("import numpy as np", kWarm));
  EXPECT_TRUE(MayImportWarmModules("import matplotlib", kWarm));  // a warm module's package
  EXPECT_TRUE(MayImportWarmModules("from pandas.api import types", kWarm));
  EXPECT_TRUE(MayImportWarmModules("import seaborn", kWarm));  // may import pandas itself
  EXPECT_TRUE(MayImportWarmModules("import helper", kWarm));   // a file of the workspace
  EXPECT_TRUE(MayImportWarmModules("from .x import y", kWarm));
  for (const char* code :
       {"np = __import__('numpy')", "import importlib\nimportlib.import_module('pandas')",
        "exec('import pandas')", "eval(\"__import__('numpy')\")", "import runpy",
        "import pickle\npickle.load(open('df.pkl', 'rb'))", "import shelve",
        "getattr(__builtins__, 'imp' + 'ort')", "import builtins", "f'{__import__(\"os\")}'"}) {
    EXPECT_TRUE(MayImportWarmModules(code, kWarm)) << code;
  }
  // A warm module of the standard library is warm too (WARM_IMPORTS=json,csv).
  EXPECT_TRUE(MayImportWarmModules("import csv", {"json", "csv"}));
  EXPECT_FALSE(MayImportWarmModules("import os", {"json", "csv"}));
}

}  // namespace
}  // namespace ci::daemon
