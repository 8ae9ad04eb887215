"""The object store: objects by resource, namespace and name, one resourceVersion counter for every
write (as etcd's revision is), and the event history that watches replay from a resourceVersion.

A resource is "pods" or "<plural>.<group>" (custom resources, customresourcedefinitions): the
name a NotFound Status gives it. Cluster-scoped objects have namespace ""."""

import copy
import threading
import time

from .selectors import matches
from .status import ApiError, not_found



def now_rfc3339(offset=0):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


class Store:
    def __init__(self, history):
        self.history = history  # events kept; older resourceVersions get 410 Gone (compaction)
        self.cond = threading.Condition()
        self.rv = 1
        self.objects = {}  # (resource, namespace, name) -> object
        self.events = []  # (rv, type, resource, object copy), oldest first
        self.closed = False

    def _record(self, kind, pod, resource):
        """Bump the revision, stamp it on the object and log the event. Caller holds the lock."""
        self.rv += 1
        pod["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append((self.rv, kind, resource, copy.deepcopy(pod)))
        del self.events[:-self.history]
        self.cond.notify_all()

    def add(self, pod, resource="pods"):
        md = pod["metadata"]
        with self.cond:
            key = (resource, md.get("namespace", ""), md["name"])
            if key in self.objects:
                return None
            self.objects[key] = pod
            self._record("ADDED", pod, resource)
            return copy.deepcopy(pod)

    def get(self, namespace, name, resource="pods"):
        with self.cond:
            pod = self.objects.get((resource, namespace, name))
            if pod is None:
                raise not_found(resource, name)
            return copy.deepcopy(pod)

    def peek(self, resource, namespace=None):
        """The live objects of a resource (not copies: read them under no mutation; for the
        CRD registry's cache and the garbage collector's scan)."""
        with self.cond:
            return [o for (r, ns, _), o in sorted(self.objects.items())
                    if r == resource and (namespace is None or ns == namespace)]

    def uids(self):
        with self.cond:
            return {o["metadata"].get("uid") for o in self.objects.values()}

    def update(self, namespace, name, mutate, resource="pods"):
        """Apply mutate(pod) under the lock; returns the new copy, or None if the pod is gone
        (a kubelet update racing a delete) or mutate returned False (nothing changed)."""
        with self.cond:
            pod = self.objects.get((resource, namespace, name))
            if pod is None or mutate(pod) is False:
                return None
            self._record("MODIFIED", pod, resource)
            return copy.deepcopy(pod)

    def remove(self, namespace, name, uid=None, resource="pods"):
        with self.cond:
            pod = self.objects.get((resource, namespace, name))
            if pod is None or (uid and pod["metadata"]["uid"] != uid):
                return None
            del self.objects[(resource, namespace, name)]
            # The last state carries the deletion stamp, as the registry's final delete does.
            pod["metadata"].setdefault("deletionTimestamp", now_rfc3339())
            pod["metadata"].setdefault("deletionGracePeriodSeconds", 0)
            self._record("DELETED", pod, resource)
            return copy.deepcopy(pod)

    def list(self, namespace, label_preds, field_preds, resource="pods"):
        """(items, resourceVersion) with namespace None meaning all namespaces."""
        with self.cond:
            items = [copy.deepcopy(p) for (r, ns, _), p in sorted(self.objects.items())
                     if r == resource and (namespace is None or ns == namespace)
                     and matches(p, label_preds, field_preds)]
            return items, str(self.rv)

    def wait_change(self, since, timeout):
        """Block until the revision passes `since` (or the timeout, or close); returns it."""
        with self.cond:
            if self.rv <= since and not self.closed:
                self.cond.wait(timeout)
            return self.rv

    def watch(self, namespace, label_preds, field_preds, since, deadline, resource="pods"):
        """Yield (type, object) events after resourceVersion `since`; with since None or "0",
        first an ADDED for every matching pod (the list the client did not do). Yields None as a
        keep-alive every second so the caller notices a gone client. Ends at the deadline."""

        def selected(pod):
            return ((namespace is None or pod["metadata"].get("namespace", "") == namespace)
                    and matches(pod, label_preds, field_preds))

        with self.cond:
            if since in (None, "", "0"):
                for (r, _, _), pod in sorted(self.objects.items()):
                    if r == resource and selected(pod):
                        yield "ADDED", copy.deepcopy(pod)
                last = self.rv
            else:
                try:
                    last = int(since)
                except ValueError:
                    raise ApiError(400, "BadRequest",
                                   f'invalid resource version "{since}"') from None
                oldest = self.events[0][0] if self.events else self.rv + 1
                if last < oldest - 1:
                    yield "ERROR", {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Failure", "reason": "Expired", "code": 410,
                                    "message": f"too old resource version: {last} ({self.rv})"}
                    return
        while True:
            with self.cond:
                pending = [e for e in self.events if e[0] > last]
                if not pending:
                    if self.closed:
                        return
                    self.cond.wait(timeout=max(0.0, min(1.0, deadline - time.time())))
                    pending = [e for e in self.events if e[0] > last]
                if pending and pending[0][0] > last + 1:
                    # Compacted while this watch was sending: an apiserver whose watcher falls
                    # behind the cache ends it with 410, never skips events silently.
                    yield "ERROR", {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Failure", "reason": "Expired", "code": 410,
                                    "message": f"too old resource version: {last} ({self.rv})"}
                    return
            for rv, kind, r, pod in pending:
                last = rv
                if r == resource and selected(pod):
                    yield kind, copy.deepcopy(pod)
            if time.time() >= deadline:
                return
            if not pending:
                yield None

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()
