#include "core/measure.h"

namespace ci {
namespace {

const char* Label(MeasureKind k) {
  switch (k) {
    case MeasureKind::kUserNamespace:
      return "user namespace";
    case MeasureKind::kPidNamespace:
      return "pid namespace";
    case MeasureKind::kMountNamespace:
      return "mount namespace";
    case MeasureKind::kNetworkNamespace:
      return "network namespace";
    case MeasureKind::kReadOnlyRoot:
      return "read-only root";
    case MeasureKind::kNoCapabilities:
      return "no capabilities";
    case MeasureKind::kNoNewPrivs:
      return "no_new_privs";
    case MeasureKind::kSeccomp:
      return "seccomp";
    case MeasureKind::kMemoryLimit:
      return "memory limit";
    case MeasureKind::kPidsLimit:
      return "pids limit";
    case MeasureKind::kCpuCap:
      return "CPU cap";
    case MeasureKind::kCpuTime:
      return "CPU time limit";
    case MeasureKind::kOpenFilesLimit:
      return "open files limit";
    case MeasureKind::kQueuedSignalsLimit:
      return "queued signals limit";
    case MeasureKind::kMessageQueueLimit:
      return "message queue limit";
    case MeasureKind::kLockedMemoryLimit:
      return "locked memory limit";
    case MeasureKind::kUserNamespaceQuotas:
      return "user namespace quotas";
    case MeasureKind::kNoTerminal:
      return "no controlling terminal";
    case MeasureKind::kOwnHostIds:
      return "own host uid/gid per sandbox";
    case MeasureKind::kInitUnreachable:
      return "init unreachable by the program";
  }
  return "unknown measure";
}

std::string Amount(const Measure& m) {
  switch (m.kind) {
    case MeasureKind::kMemoryLimit:
    case MeasureKind::kMessageQueueLimit:
    case MeasureKind::kLockedMemoryLimit:
      return m.amount % (1 << 20) == 0   ? std::to_string(m.amount >> 20) + " MiB"
             : m.amount % (1 << 10) == 0 ? std::to_string(m.amount >> 10) + " KiB"
                                         : std::to_string(m.amount) + " bytes";
    case MeasureKind::kPidsLimit:
    case MeasureKind::kOpenFilesLimit:
    case MeasureKind::kQueuedSignalsLimit:
      return std::to_string(m.amount);
    case MeasureKind::kCpuCap:
      return std::to_string(m.amount) + "%";
    case MeasureKind::kCpuTime:
      return std::to_string(m.amount) + " s";
    default:
      return "";
  }
}

}  // namespace

std::string MeasureName(const Measure& m) {
  std::string name = Label(m.kind);
  if (std::string amount = Amount(m); !amount.empty()) name.append(" ").append(amount);
  if (!m.detail.empty()) name.append(" (").append(m.detail).append(")");
  return name;
}

std::vector<std::string> MeasureNames(const std::vector<Measure>& measures) {
  std::vector<std::string> names;
  for (const Measure& m : measures) names.push_back(MeasureName(m));
  return names;
}

Measure SeccompMeasure(const std::string& profile_name) {
  return {MeasureKind::kSeccomp, 0, profile_name.empty() ? "" : profile_name + " profile"};
}

Downgrade SeccompLogOnly(const Measure& seccomp) {
  return {MeasureName(seccomp), "SECCOMP_LOG_DENIED=true: denied calls are logged and allowed",
          "unset SECCOMP_LOG_DENIED once the profile is debugged"};
}

}  // namespace ci
