"""The fake node: schedules each pod at once, "pulls" its images, starts its containers as
sandboxes and reports their states into the pod's status, as a kubelet does through the API.

Images named `*:pull-fails` fail to pull (ErrImagePull, then ImagePullBackOff); `*:unschedulable`
keeps the pod Pending with an Unschedulable condition (as with a quota or no fitting node).

Each pod runs in its own cgroup with the kubelet's limits (cgroups.py): the containers' memory
and cpu limits and the node's podPidsLimit. A container command killed by the OOM killer ends
OOMKilled; an exec it kills just dies with 137."""

import itertools
import os
import secrets
import shutil
import signal
import sys
import threading
import time

from . import cgroups
from .sandbox import Container, StartError, unmount_volumes
from .status import ApiError
from .store import now_rfc3339

NODE = "fake-node"
_pod_ips = itertools.count(2)


def _condition(kind, status, reason=None, message=None):
    c = {"type": kind, "status": status, "lastProbeTime": None,
         "lastTransitionTime": now_rfc3339()}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def _container_status(c, state, ready=False, restarts=0):
    return {"name": c["name"], "image": c["image"], "imageID": "", "ready": ready,
            "restartCount": restarts, "started": "running" in state, "state": state,
            "lastState": {}}


class PodWorker:
    """Drives one pod. The thread lives as long as the pod, because the sandboxes are started
    with --die-with-parent, which fires when the starting *thread* ends."""

    def __init__(self, node, namespace, name):
        self.node, self.namespace, self.name = node, namespace, name
        self.containers = {}  # name -> sandbox.Container
        self.stop = threading.Event()
        self.delete_deadline = None
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"pod {name}")
        self.pod_dir = None
        self.cgroup = None  # cgroups.PodCgroup once made

    def update(self, mutate):
        return self.node.store.update(self.namespace, self.name, mutate)

    def _set_status(self, **fields):
        def mutate(pod):
            pod["status"].update(fields)
        return self.update(mutate)

    def _run(self):
        try:
            self._lifecycle()
        finally:
            for c in self.containers.values():
                c.kill()
            if self.cgroup:
                left = self.cgroup.remove()
                if left:
                    sys.stderr.write(f"fake kubelet: could not remove {left}\n")
            if self.pod_dir:
                unmount_volumes(self.pod_dir)
                shutil.rmtree(self.pod_dir, ignore_errors=True)

    def _lifecycle(self):
        try:
            pod = self.node.store.get(self.namespace, self.name)
        except ApiError:
            return  # deleted before the node got to it
        spec = pod["spec"]
        images = [c["image"] for c in spec["containers"]]
        if any(i.endswith(":unschedulable") for i in images):
            self._set_status(conditions=[_condition(
                "PodScheduled", "False", "Unschedulable",
                "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                "available: 1 No preemption victims found for incoming pod.")])
            self.stop.wait()
            return
        ip = f"10.244.0.{next(_pod_ips) % 250 + 2}"

        def schedule(p):
            p["spec"]["nodeName"] = NODE
            p["status"].update({
                "conditions": [_condition("PodScheduled", "True")], "hostIP": "127.0.0.1",
                "podIP": ip, "podIPs": [{"ip": ip}], "startTime": now_rfc3339(),
                "containerStatuses": [_container_status(c, {"waiting": {
                    "reason": "ContainerCreating"}}) for c in p["spec"]["containers"]]})
        pod = self.update(schedule)
        if pod is None:
            return
        self.pod_dir = os.path.join(self.node.state_dir, "pods", pod["metadata"]["uid"])
        os.makedirs(self.pod_dir, exist_ok=True)
        started_at = time.time()
        statuses = {}
        memory, cpu = cgroups.pod_limits(pod)
        cgroup = cgroups.PodCgroup(self.node.cgroup_parents, pod["metadata"]["uid"], memory, cpu,
                                   self.node.pod_pids_limit)
        try:
            self.cgroup = cgroup  # set first: a half-made cgroup is removed too
            cgroup.create()
        except OSError as e:
            # Without its cgroup a pod would run unbounded on the test machine: never start it.
            self._publish({c["name"]: {"waiting": {
                "reason": "CreateContainerError",
                "message": f"fake kubelet: the pod's cgroup: {e}"}} for c in spec["containers"]})
            self.stop.wait()
            return
        for c in spec["containers"]:
            if c["image"].endswith(":pull-fails"):
                statuses[c["name"]] = {"waiting": {"reason": "ErrImagePull", "message": (
                    f'failed to pull and unpack image "{c["image"]}": failed to resolve '
                    f'reference "{c["image"]}": {c["image"]}: not found')}}
                continue
            sandbox = Container(pod, c, self.pod_dir, cgroup, self.node.seccomp_root,
                                self.node.pod_network == "isolated", self.node.image_files,
                                self.node.image_links)
            try:
                sandbox.start()
                self.containers[c["name"]] = sandbox
                statuses[c["name"]] = {"running": {"startedAt": now_rfc3339()}}
            except StartError as e:
                if e.reason == "StartError":
                    statuses[c["name"]] = {"terminated": {
                        "exitCode": 128, "reason": e.reason, "message": str(e),
                        "startedAt": None, "finishedAt": now_rfc3339()}}
                else:
                    statuses[c["name"]] = {"waiting": {"reason": e.reason, "message": str(e)}}
        self._publish(statuses)
        if any(s.get("waiting", {}).get("reason") == "ErrImagePull" for s in statuses.values()):
            # The kubelet retries with backoff; between attempts the reason is the backoff.
            if self.stop.wait(1.0):
                return
            for s in statuses.values():
                if s.get("waiting", {}).get("reason") == "ErrImagePull":
                    image = s["waiting"]["message"].split('"')[1]
                    s["waiting"] = {"reason": "ImagePullBackOff",
                                    "message": f'Back-off pulling image "{image}"'}
            self._publish(statuses)
        deadline = spec.get("activeDeadlineSeconds")
        while not self.stop.wait(0.05):
            changed = False
            for name, sandbox in self.containers.items():
                if "running" in statuses[name] and not sandbox.running():
                    sandbox.output_done.wait(2)  # its log complete before it says terminated
                    code = sandbox.proc.returncode
                    code = 128 - code if code < 0 else code
                    reason = "Completed" if code == 0 else "Error"
                    if code == 128 + signal.SIGKILL and \
                            cgroup.oom_kills() > cgroup.oom_kills_at_start:
                        reason = "OOMKilled"  # what containerd reports after a TaskOOM event
                    statuses[name] = {"terminated": {
                        "exitCode": code, "reason": reason,
                        "startedAt": statuses[name]["running"]["startedAt"],
                        "finishedAt": now_rfc3339()}}
                    changed = True
                    # In the server's log, which a failing test prints: why a pod ended.
                    sys.stderr.write(f"fake kubelet: pod {self.name} container {name} ended: "
                                     f"{reason}, exit code {code}; its output ends with "
                                     f"{sandbox.log_tail()!r}\n")
            if deadline is not None and time.time() - started_at >= deadline:
                for sandbox in self.containers.values():
                    sandbox.kill()
                self._set_status(phase="Failed", reason="DeadlineExceeded",
                                 message="Pod was active on the node longer than the "
                                         "specified deadline")
                deadline = None
            if changed:
                self._publish(statuses)
        # Graceful deletion: SIGTERM, wait for the grace period, SIGKILL (the stop event is set
        # by the delete handler, which removes the object once we return).

    def _publish(self, statuses):
        def mutate(pod):
            if pod["status"].get("reason") == "DeadlineExceeded":
                return False
            containers = pod["spec"]["containers"]
            pod["status"]["containerStatuses"] = [
                _container_status(c, statuses[c["name"]], ready="running" in statuses[c["name"]])
                for c in containers]
            states = list(statuses.values())
            all_running = all("running" in s for s in states)
            ready = "True" if all_running else "False"
            conditions = [_condition("PodScheduled", "True"), _condition("Initialized", "True"),
                          _condition("ContainersReady", ready), _condition("Ready", ready)]
            if all("terminated" in s for s in states):
                codes = [s["terminated"]["exitCode"] for s in states]
                pod["status"]["phase"] = "Succeeded" if not any(codes) else "Failed"
            elif all_running or any("running" in s for s in states) and all(
                    "waiting" not in s for s in states):
                pod["status"]["phase"] = "Running"
            pod["status"]["conditions"] = conditions
        self.update(mutate)

    def terminate(self, grace):
        """Stop the containers: SIGTERM now, SIGKILL after `grace` seconds if still alive.
        Blocks until they are gone."""
        for c in self.containers.values():
            if grace > 0:
                c.signal_main(signal.SIGTERM)
        end = time.time() + grace
        while time.time() < end and any(c.running() for c in self.containers.values()):
            time.sleep(0.05)
        self.stop.set()
        if self.thread.ident is not None:  # not yet started: it will find the pod gone
            self.thread.join()


class Node:
    def __init__(self, store, state_dir, pod_pids_limit=1024, seccomp_root=None,
                 pod_network="isolated", image_files=None, image_links=None):
        self.store = store
        self.state_dir = state_dir
        self.pod_pids_limit = pod_pids_limit  # the kubelet's podPidsLimit; -1: unlimited
        # The kubelet's seccomp directory: Localhost profiles are files under it.
        self.seccomp_root = seccomp_root or os.path.join(state_dir, "seccomp")
        # "isolated": each pod its own network namespace with only lo (a deny-all
        # NetworkPolicy enforced by the CNI); "host": the host's network.
        self.pod_network = pod_network
        # What every image carries besides the host's directories: image path -> host file.
        self.image_files = image_files or {}
        self.image_links = image_links or {}  # image path -> symbolic link target
        # This server's own directory of pod cgroups (random: several fakes may run at once).
        self.cgroup_parents = cgroups.instance_dirs(secrets.token_hex(4))
        self.workers = {}  # pod uid -> PodWorker
        self.lock = threading.Lock()

    def start_pod(self, pod):
        w = PodWorker(self, pod["metadata"]["namespace"], pod["metadata"]["name"])
        with self.lock:
            self.workers[pod["metadata"]["uid"]] = w
        w.thread.start()

    def worker(self, uid):
        with self.lock:
            return self.workers.get(uid)

    def stop_pod(self, uid, grace):
        with self.lock:
            w = self.workers.pop(uid, None)
        if w:
            w.terminate(grace)

    def shutdown(self):
        with self.lock:
            workers, self.workers = list(self.workers.values()), {}
        for w in workers:
            w.stop.set()
        for w in workers:
            w.thread.join(timeout=5)
        left = cgroups.remove_instance(self.cgroup_parents)
        if left:
            sys.stderr.write(f"fake kubelet: could not remove {left}\n")
