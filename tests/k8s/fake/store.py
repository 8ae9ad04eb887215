"""The object store: pods by namespace and name, one resourceVersion counter for every write (as
etcd's revision is), and the event history that watches replay from a resourceVersion."""

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
        self.pods = {}  # (namespace, name) -> pod
        self.events = []  # (rv, type, pod copy), oldest first
        self.closed = False

    def _record(self, kind, pod):
        """Bump the revision, stamp it on the pod and log the event. Caller holds the lock."""
        self.rv += 1
        pod["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append((self.rv, kind, copy.deepcopy(pod)))
        del self.events[:-self.history]
        self.cond.notify_all()

    def add(self, pod):
        md = pod["metadata"]
        with self.cond:
            key = (md["namespace"], md["name"])
            if key in self.pods:
                return None
            self.pods[key] = pod
            self._record("ADDED", pod)
            return copy.deepcopy(pod)

    def get(self, namespace, name):
        with self.cond:
            pod = self.pods.get((namespace, name))
            if pod is None:
                raise not_found("pods", name)
            return copy.deepcopy(pod)

    def update(self, namespace, name, mutate):
        """Apply mutate(pod) under the lock; returns the new copy, or None if the pod is gone
        (a kubelet update racing a delete) or mutate returned False (nothing changed)."""
        with self.cond:
            pod = self.pods.get((namespace, name))
            if pod is None or mutate(pod) is False:
                return None
            self._record("MODIFIED", pod)
            return copy.deepcopy(pod)

    def remove(self, namespace, name, uid=None):
        with self.cond:
            pod = self.pods.get((namespace, name))
            if pod is None or (uid and pod["metadata"]["uid"] != uid):
                return None
            del self.pods[(namespace, name)]
            # The last state carries the deletion stamp, as the registry's final delete does.
            pod["metadata"].setdefault("deletionTimestamp", now_rfc3339())
            pod["metadata"].setdefault("deletionGracePeriodSeconds", 0)
            self._record("DELETED", pod)
            return copy.deepcopy(pod)

    def list(self, namespace, label_preds, field_preds):
        """(items, resourceVersion) with namespace None meaning all namespaces."""
        with self.cond:
            items = [copy.deepcopy(p) for (ns, _), p in sorted(self.pods.items())
                     if (namespace is None or ns == namespace)
                     and matches(p, label_preds, field_preds)]
            return items, str(self.rv)

    def watch(self, namespace, label_preds, field_preds, since, deadline):
        """Yield (type, object) events after resourceVersion `since`; with since None or "0",
        first an ADDED for every matching pod (the list the client did not do). Yields None as a
        keep-alive every second so the caller notices a gone client. Ends at the deadline."""

        def selected(pod):
            return ((namespace is None or pod["metadata"]["namespace"] == namespace)
                    and matches(pod, label_preds, field_preds))

        with self.cond:
            if since in (None, "", "0"):
                for _, pod in sorted(self.pods.items()):
                    if selected(pod):
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
                pending = [(rv, t, p) for rv, t, p in self.events if rv > last]
                if not pending:
                    if self.closed:
                        return
                    self.cond.wait(timeout=max(0.0, min(1.0, deadline - time.time())))
                    pending = [(rv, t, p) for rv, t, p in self.events if rv > last]
                if pending and pending[0][0] > last + 1:
                    # Compacted while this watch was sending: an apiserver whose watcher falls
                    # behind the cache ends it with 410, never skips events silently.
                    yield "ERROR", {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                    "status": "Failure", "reason": "Expired", "code": 410,
                                    "message": f"too old resource version: {last} ({self.rv})"}
                    return
            for rv, kind, pod in pending:
                last = rv
                if selected(pod):
                    yield kind, copy.deepcopy(pod)
            if time.time() >= deadline:
                return
            if not pending:
                yield None

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()
