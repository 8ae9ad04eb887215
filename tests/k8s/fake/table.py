"""The server-side printing kubectl get asks for (Accept: application/json;as=Table;g=meta.k8s.io):
the pod columns of pkg/printers/internalversion (NAME READY STATUS RESTARTS AGE)."""

import calendar
import time

COLUMNS = [
    {"name": "Name", "type": "string", "format": "name", "description": "Name of the pod",
     "priority": 0},
    {"name": "Ready", "type": "string", "format": "", "description": "ready/total containers",
     "priority": 0},
    {"name": "Status", "type": "string", "format": "", "description": "The pod's state",
     "priority": 0},
    {"name": "Restarts", "type": "string", "format": "", "description": "container restarts",
     "priority": 0},
    {"name": "Age", "type": "string", "format": "", "description": "since creation",
     "priority": 0},
    {"name": "IP", "type": "string", "format": "", "description": "pod IP", "priority": 1},
    {"name": "Node", "type": "string", "format": "", "description": "node", "priority": 1},
]


def _age(stamp):
    seconds = int(time.time() - calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def pod_state(pod):
    """The STATUS column: a waiting/terminated reason wins over the phase, as kubectl prints."""
    status = pod.get("status") or {}
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    reason = status.get("reason") or status.get("phase", "Pending")
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
    return reason


def pod_table(pods, resource_version, include_object):
    rows = []
    for pod in pods:
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        ready = sum(1 for s in statuses if s.get("ready"))
        total = len(pod["spec"]["containers"])
        row = {"cells": [pod["metadata"]["name"], f"{ready}/{total}", pod_state(pod),
                         str(sum(s.get("restartCount", 0) for s in statuses)),
                         _age(pod["metadata"]["creationTimestamp"]),
                         (pod.get("status") or {}).get("podIP", "<none>"),
                         pod["spec"].get("nodeName", "<none>")]}
        if include_object == "Object":
            row["object"] = pod
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": pod["metadata"]}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": resource_version},
            "columnDefinitions": COLUMNS, "rows": rows}
