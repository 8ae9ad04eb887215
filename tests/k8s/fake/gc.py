"""Deletion with propagation policies, and the garbage collector (kube-controller-manager's),
for pods, custom resources and CRDs alike.

- Background (the default for custom resources): the owner goes at once; the collector then
  deletes every object whose ownerReferences name no live uid any more.
- Foreground: the owner gets deletionTimestamp and the `foregroundDeletion` finalizer; the
  collector deletes its dependents and removes the owner once none is left.
- Orphan: the dependents lose their ownerReferences to the owner, then the owner goes.

The collector wakes on every store change and once a second. Pods it deletes go through the
server's normal pod deletion (grace period, kill, cgroup cleanup)."""

import copy
import sys
import threading

from .crds import CRD_RESOURCE
from .status import ApiError, bad_request, conflict, not_found
from .store import now_rfc3339

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


def success(name, resource, uid):
    plural, _, group = resource.partition(".")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": name, "group": group, "kind": plural, "uid": uid}}


class Collector:
    def __init__(self, api):
        """api: the FakeApiServer (its store, objects registry and delete_pod)."""
        self.api = api
        self.store = api.store
        self.known = set()  # uids of every pod seen
        self.thread = threading.Thread(target=self._run, daemon=True, name="garbage-collector")

    def start(self):
        self.thread.start()

    # ---- deletion as the registry does it

    def delete(self, resource, ns, name, options=None, policy=None):
        """DELETE of one non-pod object. Returns the answer's body."""
        options = options or {}
        policy = policy or options.get("propagationPolicy") or "Background"
        if options.get("orphanDependents") is True:
            policy = "Orphan"
        if policy not in ("Background", "Foreground", "Orphan"):
            raise bad_request(f'propagationPolicy "{policy}" is not supported')
        current = self.store.get(ns, name, resource)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on {resource} '
                           f'"{name}": Precondition failed: UID in precondition: {pre["uid"]}, '
                           f'UID in object meta: {current["metadata"]["uid"]}',
                           {"name": name, "kind": resource})
        if pre.get("resourceVersion") and \
                pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise conflict(resource, name)
        uid = current["metadata"]["uid"]
        if policy == "Orphan":
            self._orphan(uid)
        finalizers = list(current["metadata"].get("finalizers") or [])
        if policy == "Foreground" and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if finalizers:
            def mark(obj):
                md = obj["metadata"]
                if md.get("deletionTimestamp") and md.get("finalizers") == finalizers:
                    return False
                md.setdefault("deletionTimestamp", now_rfc3339())
                md.setdefault("deletionGracePeriodSeconds", 0)
                md["finalizers"] = finalizers
            marked = self.store.update(ns, name, mark, resource)
            return marked or self.store.get(ns, name, resource)
        if resource == CRD_RESOURCE:
            self._drop_crd_objects(current)
        gone = self.store.remove(ns, name, uid, resource)
        if gone is None:
            raise not_found(resource, name)
        return success(name, resource, uid)

    def _drop_crd_objects(self, crd):
        resource = f'{crd["spec"]["names"]["plural"]}.{crd["spec"]["group"]}'
        for obj in self.store.peek(resource):
            md = obj["metadata"]
            self.store.remove(md.get("namespace", ""), md["name"], md["uid"], resource)

    def _orphan(self, uid):
        for resource, ns, name, refs, _ in self._scan():
            if any(r.get("uid") == uid for r in refs):
                def strip(obj):
                    obj["metadata"]["ownerReferences"] = [
                        r for r in obj["metadata"].get("ownerReferences") or []
                        if r.get("uid") != uid]
                    if not obj["metadata"]["ownerReferences"]:
                        del obj["metadata"]["ownerReferences"]
                self.store.update(ns, name, strip, resource)

    # ---- the collector

    def _scan(self):
        """[(resource, namespace, name, ownerReferences, metadata)] of every object, copied."""
        with self.store.cond:
            return [(r, ns, name, copy.deepcopy(o["metadata"].get("ownerReferences") or []),
                     copy.deepcopy(o["metadata"]))
                    for (r, ns, name), o in self.store.objects.items()]

    def _delete_dependent(self, resource, ns, name):
        try:
            if resource == "pods":
                self.api.delete_pod(ns, name, None)
            else:
                self.delete(resource, ns, name)
        except ApiError:
            pass  # gone meanwhile

    def _judged(self, ref):
        """Whether the fake stores the owner's kind at all (pods, CRDs, served custom
        resources): an owner of another kind (a Deployment, a ReplicaSet: names only here)
        cannot be looked up, so its dependents are left alone."""
        api_version, kind = ref.get("apiVersion", ""), ref.get("kind", "")
        if (api_version, kind) == ("v1", "Pod"):
            # Only an owner pod this server has had: tests run the daemon outside the fake,
            # so its executor pods name a daemon Pod that never exists here.
            return ref.get("uid") in self.known
        if (api_version, kind) == ("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
            return True
        group, _, version = api_version.rpartition("/")
        registry = self.api.objects.registry
        registry.refresh()
        return any(i.kind == kind and i.group == group
                   for i in registry.by_resource.values())

    def collect(self):
        scan = self._scan()
        self.known.update(md.get("uid") for r, _, _, _, md in scan if r == "pods")
        objects = [(r, ns, name, [ref for ref in refs if self._judged(ref)], md)
                   for r, ns, name, refs, md in scan]
        live = {md.get("uid"): (r, ns, name, md) for r, ns, name, _, md in objects}
        foreground = {uid for uid, (_, _, _, md) in live.items()
                      if md.get("deletionTimestamp") and FOREGROUND in (md.get("finalizers")
                                                                        or [])}
        waiting = set()
        for resource, ns, name, refs, md in objects:
            if not refs:
                continue
            present = [r for r in refs if r.get("uid") in live]
            if md.get("deletionTimestamp") and resource != "pods" and FOREGROUND not in (
                    md.get("finalizers") or []):
                waiting.update(r.get("uid") for r in present)
                continue
            if not present or any(r.get("uid") in foreground for r in present):
                waiting.update(r.get("uid") for r in present)
                if not md.get("deletionTimestamp"):
                    self._delete_dependent(resource, ns, name)
                else:
                    waiting.update(r.get("uid") for r in present)
            elif len(present) != len(refs):
                gone = {r.get("uid") for r in refs} - {r.get("uid") for r in present}

                def prune(obj, gone=gone):
                    obj["metadata"]["ownerReferences"] = [
                        r for r in obj["metadata"].get("ownerReferences") or []
                        if r.get("uid") not in gone]
                self.store.update(ns, name, prune, resource)
        for uid in foreground - waiting:
            resource, ns, name, md = live[uid]
            if any(r.get("uid") == uid for _, _, _, refs, _ in self._scan() for r in refs):
                continue

            def finish(obj):
                obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers")
                                                 or [] if f != FOREGROUND]
            done = self.store.update(ns, name, finish, resource)
            if done and not done["metadata"]["finalizers"]:
                self.store.remove(ns, name, uid, resource)

    def _run(self):
        seen = 0
        while not self.store.closed:
            now = self.store.wait_change(seen, 1.0)
            seen = now
            try:
                self.collect()
            except Exception as e:  # a fake's bug: say so, keep collecting
                sys.stderr.write(f"fake garbage collector: {e!r}\n")
