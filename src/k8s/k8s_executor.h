// EXECUTOR_BACKEND=kubernetes: one pod per execution or session on a Kubernetes cluster reached
// over its API (api_client.h): the pod from the spec (pod_spec.h), created and watched until it
// runs (pod_lifecycle.h), then driven by the same exec-driven sandbox as a Docker container
// (container/exec_sandbox.h over pod_container.h), deleted with grace 0 after its last run, and
// what a crashed daemon left found by label and reaped. README.md has the lifecycle.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "core/executor.h"
#include "k8s/k8s_options.h"
#include "k8s/kube_config.h"

namespace ci::k8s {

struct K8sExecutorOptions {
  KubeConfig connection;
  K8sOptions pods;
  std::chrono::milliseconds api_timeout{10000};        // one API call
  std::chrono::seconds start_timeout{120};             // created to Running (scheduling, the image)
  std::chrono::milliseconds shared_pool_period{2000};  // a shared pool's keeper looks this often
};

std::unique_ptr<Executor> MakeK8sExecutor(asio::any_io_executor ex, K8sExecutorOptions opts);

// The daemon instance's id, its pods' owner label: POD_NAME in a cluster (a restart of the
// daemon's container keeps it), else HostInstancePrefix() + the pid.
std::string InstanceId(const K8sOptions& pods);
// "<host>-" as a label value's start (at most 50 characters).
std::string HostInstancePrefix();
// An owner id of this host's form whose pid is no longer alive (a daemon here that died).
bool OwnerGoneHere(std::string_view owner);
// `id` as a label value: characters other than [A-Za-z0-9_.-] replaced by '-', at most 63,
// starting with an alphanumeric.
std::string LabelValue(std::string id);

}  // namespace ci::k8s
