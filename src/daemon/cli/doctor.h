// `code-interpreter doctor`: checks what the host offers the sandboxes and says how to fix what is
// missing. The probing lives in src/runtime/ (host_checks, host_probe); this file prints it.
#pragma once

namespace ci::daemon {

// Prints one line per check (OK / WARN / FAIL, what, detail, and the fix when not OK), grouped
// in sections, then a summary. Returns 0 when nothing FAILs, 1 otherwise (2: bad configuration).
int DoctorCommand(int argc, char** argv);

}  // namespace ci::daemon
