"""A minimal in-process agent-sandbox controller (kubernetes-sigs/agent-sandbox v0.5.6, v1beta1):
Sandbox -> Pod, SandboxWarmPool -> pool-owned Sandboxes, SandboxClaim -> an adopted pool Sandbox
or a cold-started one. It reconciles on every store change and once a second, and writes through
the same admission, schema and resourceVersion checks as a client (a 409 is dropped and retried
on the next pass, as controller-runtime requeues). See /tests/k8s/README.md for what is left out.

Upstream: controllers/sandbox_controller.go, extensions/controllers/sandboxwarmpool_controller.go,
extensions/controllers/sandboxclaim_controller.go."""

import calendar
import copy
import hashlib
import json
import sys
import threading
import time

from .status import ApiError
from .store import now_rfc3339

SANDBOXES = "sandboxes.agents.x-k8s.io"
TEMPLATES = "sandboxtemplates.extensions.agents.x-k8s.io"
POOLS = "sandboxwarmpools.extensions.agents.x-k8s.io"
CLAIMS = "sandboxclaims.extensions.agents.x-k8s.io"
EXT_GROUP = "extensions.agents.x-k8s.io"

L_NAME_HASH = "agents.x-k8s.io/sandbox-name-hash"
L_POOL = "agents.x-k8s.io/warm-pool-sandbox"
L_TEMPLATE_REF = "agents.x-k8s.io/sandbox-template-ref-hash"
L_LAUNCH = "agents.x-k8s.io/launch-type"
L_CREATED_BY = "agents.x-k8s.io/created-by"
L_CLAIM_UID = "agents.x-k8s.io/claim-uid"
L_POD_TEMPLATE_HASH = "agents.x-k8s.io/sandbox-pod-template-hash"
L_TEMPLATE_HASH = "agents.x-k8s.io/sandbox-template-hash"
A_POD_NAME = "agents.x-k8s.io/pod-name"
A_TEMPLATE_REF = "agents.x-k8s.io/sandbox-template-ref"
A_SANDBOX_NAME = "agents.x-k8s.io/sandbox-name"
SYSTEM_PREFIXES = ("agents.x-k8s.io/", "extensions.agents.x-k8s.io/")
WARM_CANDIDATE_GRACE = 2.0  # warmCandidateGracePeriod


def name_hash(name):
    """NameHash: FNV-1a 32-bit, 8 lowercase hex digits."""
    h = 0x811c9dc5
    for b in name.encode():
        h = ((h ^ b) * 0x01000193) & 0xffffffff
    return f"{h:08x}"


def _blueprint_hash(blueprint):
    return hashlib.sha256(json.dumps(blueprint, sort_keys=True).encode()).hexdigest()[:8]


def _parse_time(stamp):
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%fZ"):
        try:
            return calendar.timegm(time.strptime(stamp, fmt))
        except (TypeError, ValueError):
            continue
    return None


def _controller_ref(obj):
    return next((r for r in obj["metadata"].get("ownerReferences") or []
                 if r.get("controller")), None)


def _owner_ref(owner, api_version, kind):
    return {"apiVersion": api_version, "kind": kind, "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _condition(conditions, type_, status, reason, message, generation):
    """metav1 SetStatusCondition: lastTransitionTime moves only when status changes."""
    old = next((c for c in conditions or [] if c.get("type") == type_), None)
    stamp = old["lastTransitionTime"] if old and old.get("status") == status else now_rfc3339()
    return {"type": type_, "status": status, "reason": reason, "message": message or "",
            "observedGeneration": generation, "lastTransitionTime": stamp}


def _get_condition(obj, type_):
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == type_), None)


def _is_ready(obj):
    c = _get_condition(obj, "Ready")
    return bool(c and c.get("status") == "True")


class Controller:
    def __init__(self, api):
        self.api = api
        self.store = api.store
        self.objects = api.objects
        self.first_seen = {}  # claim uid -> time the controller first saw it
        self.logged = set()
        self.thread = threading.Thread(target=self._run, daemon=True, name="agent-sandbox")

    def start(self):
        self.thread.start()

    def _log(self, text):
        if text not in self.logged:
            self.logged.add(text)
            sys.stderr.write(f"fake agent-sandbox controller: {text}\n")

    def _run(self):
        seen = 0
        while not self.store.closed:
            seen = self.store.wait_change(seen, 1.0)
            time.sleep(0.02)  # let a burst of writes land first
            try:
                self.reconcile_all()
            except Exception as e:  # a fake's bug: say so, keep reconciling
                import traceback
                traceback.print_exc()
                sys.stderr.write(f"fake agent-sandbox controller: {e!r}\n")

    # ---- store helpers

    def _info(self, resource):
        return self.objects.registry.storage(resource)

    def _list(self, resource, ns=None):
        return self.store.list(ns, [], [], resource)[0]

    def _get(self, resource, ns, name):
        try:
            return self.store.get(ns, name, resource)
        except ApiError:
            return None

    def _try(self, what, fn, *args):
        try:
            return fn(*args)
        except ApiError as e:
            if e.code not in (404, 409):
                self._log(f"{what}: {e.body.get('message')}")
            return None

    def _write_status(self, resource, obj, status):
        if obj.get("status") == status:
            return obj
        new = copy.deepcopy(obj)
        new["status"] = status
        md = obj["metadata"]
        return self._try(f"status of {md['name']}", self.objects.update, self._info(resource),
                         md["namespace"], md["name"], new, "status")

    def _update(self, resource, obj):
        md = obj["metadata"]
        return self._try(f"update of {md['name']}", self.objects.update, self._info(resource),
                         md["namespace"], md["name"], obj)

    def reconcile_all(self):
        if not self._info(SANDBOXES):
            return
        pods = {}
        for pod in self._list("pods"):
            ref = _controller_ref(pod)
            if ref:
                pods.setdefault(ref.get("uid"), []).append(pod)
        for sb in self._list(SANDBOXES):
            self.reconcile_sandbox(sb, pods.get(sb["metadata"]["uid"], []))
        if self._info(POOLS) and self._info(TEMPLATES):
            for pool in self._list(POOLS):
                self.reconcile_pool(pool)
        if self._info(CLAIMS) and self._info(POOLS) and self._info(TEMPLATES):
            claims = self._list(CLAIMS)
            live = {c["metadata"]["uid"] for c in claims}
            self.first_seen = {u: t for u, t in self.first_seen.items() if u in live}
            for claim in claims:
                self.reconcile_claim(claim, claims)

    # ---- Sandbox

    def _pod_labels(self, sb):
        """What reconcilePod/updatePodMetadata put on the pod."""
        labels = {k: v for k, v in ((sb["spec"].get("podTemplate") or {}).get("metadata") or {})
                  .get("labels", {}).items() if not k.startswith(SYSTEM_PREFIXES)}
        labels[L_NAME_HASH] = name_hash(sb["metadata"]["name"])
        ref = _controller_ref(sb)
        sb_labels = sb["metadata"].get("labels") or {}
        if ref and ref.get("apiVersion", "").split("/")[0] == EXT_GROUP:
            if ref.get("kind") == "SandboxWarmPool" and sb_labels.get(L_POOL):
                labels[L_POOL] = sb_labels[L_POOL]
            if sb_labels.get(L_TEMPLATE_REF):
                labels[L_TEMPLATE_REF] = sb_labels[L_TEMPLATE_REF]
        if sb_labels.get(L_CREATED_BY):
            labels[L_CREATED_BY] = sb_labels[L_CREATED_BY]
        return labels

    def reconcile_sandbox(self, sb, owned_pods):
        md, spec = sb["metadata"], sb["spec"]
        if md.get("deletionTimestamp"):
            return
        ns, name = md["namespace"], md["name"]
        gen = md.get("generation", 1)
        old_status = sb.get("status") or {}
        conds = old_status.get("conditions") or []
        pod_name = (md.get("annotations") or {}).get(A_POD_NAME) or name
        pods = [p for p in owned_pods if not p["metadata"].get("deletionTimestamp")]
        pod = next((p for p in pods if p["metadata"]["name"] == pod_name), pods[0] if pods
                   else None)
        shutdown = _parse_time(spec.get("shutdownTime"))
        if shutdown is not None and time.time() >= shutdown:
            for p in pods:
                self._try(f"pod {p['metadata']['name']}", self.api.delete_pod, ns,
                          p["metadata"]["name"], None)
            if spec.get("shutdownPolicy") == "Delete":
                self._try(f"sandbox {name}", self.api.collector.delete, SANDBOXES, ns, name)
                return
            self._write_status(SANDBOXES, sb, {"conditions": [_condition(
                conds, "Ready", "False", "SandboxExpired", "Sandbox has expired", gen)]})
            return
        if spec.get("operatingMode", "Running") == "Suspended":
            for p in pods:
                self._try(f"pod {p['metadata']['name']}", self.api.delete_pod, ns,
                          p["metadata"]["name"], None)
            if A_POD_NAME in (md.get("annotations") or {}):
                new = copy.deepcopy(sb)
                del new["metadata"]["annotations"][A_POD_NAME]
                self._update(SANDBOXES, new)
                return
            self._write_status(SANDBOXES, sb, {"conditions": [_condition(
                conds, "Ready", "False", "SandboxSuspended", "Sandbox is suspended", gen)]})
            return
        finished = _get_condition(sb, "Finished")
        if pod is None and not owned_pods and not (finished and finished["status"] == "True"):
            # No pod (never made, or deleted before it ended): make one, as reconcilePod.
            pod = self._create_pod(sb, pod_name)
            if isinstance(pod, str):
                self._write_status(SANDBOXES, sb, {**old_status, "conditions": [_condition(
                    conds, "Ready", "False", "ReconcilerError", f"Error seen: {pod}", gen)]})
                return
            if pod is None:
                return
            if (md.get("annotations") or {}).get(A_POD_NAME) != pod["metadata"]["name"]:
                new = copy.deepcopy(sb)
                new["metadata"].setdefault("annotations", {})[A_POD_NAME] = pod["metadata"]["name"]
                self._update(SANDBOXES, new)
                return
        if pod is not None:
            want = self._pod_labels(sb)
            labels = pod["metadata"].get("labels") or {}
            fixed = {k: v for k, v in labels.items()
                     if k not in (L_POOL, L_TEMPLATE_REF, L_CREATED_BY) or k in want}
            fixed.update(want)
            if fixed != labels:
                def relabel(p, fixed=fixed):
                    p["metadata"]["labels"] = fixed
                self.store.update(ns, pod["metadata"]["name"], relabel)
        self._write_status(SANDBOXES, sb, self._sandbox_status(sb, pod, len(pods), conds, gen))

    def _create_pod(self, sb, pod_name):
        md, spec = sb["metadata"], sb["spec"]
        template = spec.get("podTemplate") or {}
        annotations = {k: v for k, v in ((template.get("metadata") or {}).get("annotations")
                                         or {}).items() if not k.startswith(SYSTEM_PREFIXES)}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": pod_name, "namespace": md["namespace"],
                            "labels": self._pod_labels(sb),
                            "ownerReferences": [_owner_ref(sb, "agents.x-k8s.io/v1beta1",
                                                           "Sandbox")]},
               "spec": copy.deepcopy(template.get("spec") or {})}
        if annotations:
            pod["metadata"]["annotations"] = annotations
        try:
            return self.api.create_pod(md["namespace"], pod)
        except ApiError as e:
            if e.code == 409:
                return None  # made meanwhile (or another object's pod): the next pass sees it
            return e.body.get("message", str(e))

    @staticmethod
    def _sandbox_status(sb, pod, count, conds, gen):
        status = {}
        if pod is None:
            finished = _get_condition(sb, "Finished")
            out = [_condition(conds, "Ready", "False", "DependenciesNotReady",
                              "Pod does not exist", gen)]
            if finished:
                out = [_condition(conds, "Ready", "False", finished["reason"],
                                  finished.get("message", ""), gen), finished]
            return {"conditions": out}
        ps = pod.get("status") or {}
        phase = ps.get("phase", "Pending")
        ips = [p["ip"] for p in ps.get("podIPs") or [] if p.get("ip")]
        pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in ps.get("conditions") or [])
        scheduled = next((c for c in ps.get("conditions") or []
                          if c.get("type") == "PodScheduled"), None)
        out = []
        if count > 1:
            out.append(_condition(conds, "Ready", "False", "MultiplePods",
                                  "more than one pod is owned by the Sandbox", gen))
        elif phase == "Running" and pod_ready and ips:
            out.append(_condition(conds, "Ready", "True", "DependenciesReady",
                                  "Pod is Ready; Service Not Required", gen))
        elif phase in ("Succeeded", "Failed"):
            reason = "PodSucceeded" if phase == "Succeeded" else "PodFailed"
            out.append(_condition(conds, "Ready", "False", reason, f"Pod is {phase}", gen))
            out.append(_condition(conds, "Finished", "True", reason, f"Pod is {phase}", gen))
        else:
            out.append(_condition(conds, "Ready", "False", "DependenciesNotReady",
                                  f"Pod exists with phase: {phase}; Service Not Required", gen))
        if scheduled:
            out.append(_condition(conds, "PodScheduled", scheduled.get("status", "Unknown"),
                                  "PodScheduled" if scheduled.get("status") == "True"
                                  else "PodSchedulingUnknown", scheduled.get("message", ""),
                                  gen))
        status["conditions"] = out
        status["selector"] = f"{L_NAME_HASH}={name_hash(sb['metadata']['name'])}"
        if ips:
            status["podIPs"] = ips
        if pod["spec"].get("nodeName"):
            status["nodeName"] = pod["spec"]["nodeName"]
        return status

    # ---- SandboxWarmPool

    @staticmethod
    def _blueprint(template):
        spec = template.get("spec") or {}
        return {k: copy.deepcopy(spec[k]) for k in ("podTemplate", "volumeClaimTemplates",
                                                    "service") if k in spec}

    @staticmethod
    def _secure_defaults(spec):
        pod_spec = spec.setdefault("podTemplate", {}).setdefault("spec", {})
        pod_spec.setdefault("automountServiceAccountToken", False)

    def _members(self, pool):
        h = name_hash(pool["metadata"]["name"])
        return [sb for sb in self._list(SANDBOXES, pool["metadata"]["namespace"])
                if (sb["metadata"].get("labels") or {}).get(L_POOL) == h
                and (_controller_ref(sb) or {}).get("uid") == pool["metadata"]["uid"]]

    def reconcile_pool(self, pool):
        md = pool["metadata"]
        if md.get("deletionTimestamp"):
            return
        ns, name = md["namespace"], md["name"]
        members = [sb for sb in self._members(pool)
                   if not sb["metadata"].get("deletionTimestamp")]
        desired = pool["spec"].get("replicas", 1)
        tpl_name = (pool["spec"].get("sandboxTemplateRef") or {}).get("name", "")
        template = self._get(TEMPLATES, ns, tpl_name)
        if template is None:
            self._log(f"SandboxWarmPool {ns}/{name}: SandboxTemplate {tpl_name!r} not found")
        elif len(members) < desired:
            blueprint = self._blueprint(template)
            bp_hash = _blueprint_hash(blueprint)
            labels = {L_POOL: name_hash(name), L_TEMPLATE_REF: name_hash(tpl_name),
                      L_LAUNCH: "warm", L_POD_TEMPLATE_HASH: bp_hash, L_TEMPLATE_HASH: bp_hash,
                      L_CREATED_BY: "controller"}
            for _ in range(desired - len(members)):
                spec = copy.deepcopy(blueprint)
                pt_md = spec.setdefault("podTemplate", {}).setdefault("metadata", {})
                pt_md.setdefault("labels", {}).update(
                    {k: labels[k] for k in (L_POOL, L_TEMPLATE_REF, L_POD_TEMPLATE_HASH,
                                            L_TEMPLATE_HASH)})
                self._secure_defaults(spec)
                sb = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
                      "metadata": {"generateName": f"{name}-", "namespace": ns,
                                   "labels": dict(labels),
                                   "annotations": {A_TEMPLATE_REF: tpl_name},
                                   "ownerReferences": [_owner_ref(
                                       pool, f"{EXT_GROUP}/v1beta1", "SandboxWarmPool")]},
                      "spec": spec}
                created = self._try(f"a sandbox of pool {name}", self.objects.create,
                                    self._info(SANDBOXES), ns, sb)
                if created:
                    members.append(created)
        if len(members) > desired:
            # Not-ready ones first, then the newest.
            members.sort(key=lambda s: (_is_ready(s), s["metadata"]["creationTimestamp"]))
            for sb in members[:len(members) - desired]:
                self._try(f"sandbox {sb['metadata']['name']}", self.api.collector.delete,
                          SANDBOXES, ns, sb["metadata"]["name"])
            members = members[len(members) - desired:]
        status = {"replicas": len(members), "readyReplicas": sum(map(_is_ready, members)),
                  "selector": f"{L_POOL}={name_hash(name)}",
                  "observedGeneration": md.get("generation", 1)}
        self._write_status(POOLS, pool, status)

    # ---- SandboxClaim

    def reconcile_claim(self, claim, claims):
        md, spec = claim["metadata"], claim["spec"]
        if md.get("deletionTimestamp"):
            return
        ns, name, uid = md["namespace"], md["name"], md["uid"]
        gen = md.get("generation", 1)
        self.first_seen.setdefault(uid, time.time())
        status = claim.get("status") or {}
        conds = status.get("conditions") or []

        def set_ready(state, reason, message, extra=None):
            new = {k: v for k, v in status.items() if k != "conditions"}
            new.update(extra or {})
            new["conditions"] = [_condition(conds, "Ready", state, reason, message, gen)]
            self._write_status(CLAIMS, claim, new)

        owned = [sb for sb in self._list(SANDBOXES, ns)
                 if (_controller_ref(sb) or {}).get("uid") == uid]
        lifecycle = spec.get("lifecycle") or {}
        shutdown = _parse_time(lifecycle.get("shutdownTime"))
        if shutdown is not None and time.time() >= shutdown:
            policy = lifecycle.get("shutdownPolicy", "Retain")
            if policy in ("Delete", "DeleteForeground"):
                self._try(f"claim {name}", self.api.collector.delete, CLAIMS, ns, name, None,
                          "Foreground" if policy == "DeleteForeground" else "Background")
                return
            for sb in owned:
                self._try(f"sandbox {sb['metadata']['name']}", self.api.collector.delete,
                          SANDBOXES, ns, sb["metadata"]["name"])
            return set_ready("False", "ClaimExpired", "Claim expired", {"sandbox": {}})
        pool_name = (spec.get("warmPoolRef") or {}).get("name", "")
        pool = self._get(POOLS, ns, pool_name)
        if pool is None:
            return set_ready("False", "WarmPoolNotFound",
                             f'SandboxWarmPool "{pool_name}" not found')
        tpl_name = (pool["spec"].get("sandboxTemplateRef") or {}).get("name", "")
        template = self._get(TEMPLATES, ns, tpl_name)
        if template is None:
            return set_ready("False", "TemplateNotFound",
                             f'SandboxTemplate "{tpl_name}" not found')
        sb = self._find_or_adopt(claim, claims, pool, template, owned)
        if sb is None:
            return set_ready("False", "SandboxCreatePending", "Sandbox is being provisioned")
        ready = _get_condition(sb, "Ready")
        new = {k: v for k, v in status.items() if k != "conditions"}
        sandbox_status = {"name": sb["metadata"]["name"]}
        if (sb.get("status") or {}).get("podIPs"):
            sandbox_status["podIPs"] = sb["status"]["podIPs"]
        new["sandbox"] = sandbox_status
        if ready:
            forwarded = dict(ready)
            out = [forwarded]
        else:
            out = [_condition(conds, "Ready", "False", "SandboxNotReady",
                              "Sandbox is not ready", gen)]
        finished = _get_condition(sb, "Finished")
        if finished:
            out.append(dict(finished))
        new["conditions"] = out
        self._write_status(CLAIMS, claim, new)

    def _find_or_adopt(self, claim, claims, pool, template, owned):
        md = claim["metadata"]
        ns, name, uid = md["namespace"], md["name"], md["uid"]
        by_name = {sb["metadata"]["name"]: sb for sb in owned}
        recorded = ((claim.get("status") or {}).get("sandbox") or {}).get("name")
        if recorded in by_name:
            return by_name[recorded]
        noted = (md.get("annotations") or {}).get(A_SANDBOX_NAME)
        if noted:
            if noted in by_name:
                return by_name[noted]
            sb = self._get(SANDBOXES, ns, noted)
            if sb is not None and (_controller_ref(sb) or {}).get("uid") == \
                    pool["metadata"]["uid"]:
                return self._complete_adoption(claim, sb, template)
            # A stale reference: drop it (the next pass looks again).
            new = copy.deepcopy(claim)
            del new["metadata"]["annotations"][A_SANDBOX_NAME]
            self._update(CLAIMS, new)
            return None
        if name in by_name:
            return by_name[name]
        if owned:
            return owned[0]
        if not spec_forces_cold(claim["spec"]):
            taken = {(c["metadata"].get("annotations") or {}).get(A_SANDBOX_NAME)
                     for c in claims if c["metadata"]["uid"] != uid}
            candidates = [sb for sb in self._members(pool)
                          if not sb["metadata"].get("deletionTimestamp")
                          and (sb["metadata"].get("labels") or {}).get(L_TEMPLATE_REF)
                          and (sb.get("status") or {}).get("podIPs")
                          and sb["metadata"]["name"] not in taken]
            candidates.sort(key=lambda s: (not _is_ready(s), s["metadata"]["creationTimestamp"],
                                           s["metadata"]["name"]))
            if candidates:
                sb = candidates[0]
                # (a) the commit point: the claim records the sandbox under its resourceVersion.
                new = copy.deepcopy(claim)
                new["metadata"].setdefault("annotations", {})[A_SANDBOX_NAME] = \
                    sb["metadata"]["name"]
                if self._update(CLAIMS, new) is None:
                    return None
                return self._complete_adoption(new, sb, template)
            grace_over = time.time() - self.first_seen.get(uid, 0) >= WARM_CANDIDATE_GRACE
            if pool["spec"].get("replicas", 1) > 0 and not grace_over:
                return None
        return self._cold_start(claim, template)

    def _complete_adoption(self, claim, sb, template):
        """(b) completeAdoption: the sandbox leaves the pool for the claim, under its
        resourceVersion (a 409 retries on the next pass)."""
        new = copy.deepcopy(sb)
        smd = new["metadata"]
        labels = smd.setdefault("labels", {})
        for key in (L_POOL, L_POD_TEMPLATE_HASH, L_TEMPLATE_HASH):
            labels.pop(key, None)
        labels[L_LAUNCH] = "warm"
        labels[L_CLAIM_UID] = claim["metadata"]["uid"]
        created_by = (claim["metadata"].get("labels") or {}).get(L_CREATED_BY)
        if created_by:
            labels[L_CREATED_BY] = created_by
        smd["ownerReferences"] = [_owner_ref(claim, f"{EXT_GROUP}/v1beta1", "SandboxClaim")]
        smd.setdefault("annotations", {}).setdefault(A_POD_NAME, smd["name"])
        pt = new["spec"].setdefault("podTemplate", {})
        tpl_meta = copy.deepcopy(((template.get("spec") or {}).get("podTemplate") or {})
                                 .get("metadata") or {})
        extra = claim["spec"].get("additionalPodMetadata") or {}
        for field in ("labels", "annotations"):
            merged = dict(tpl_meta.get(field) or {})
            merged.update(extra.get(field) or {})
            tpl_meta[field] = merged
        tpl_meta["labels"][L_CLAIM_UID] = claim["metadata"]["uid"]
        if labels.get(L_TEMPLATE_REF):
            tpl_meta["labels"][L_TEMPLATE_REF] = labels[L_TEMPLATE_REF]
        if not tpl_meta["annotations"]:
            del tpl_meta["annotations"]
        pt["metadata"] = tpl_meta
        return self._update(SANDBOXES, new)

    def _cold_start(self, claim, template):
        md = claim["metadata"]
        ns = md["namespace"]
        spec = self._blueprint(template)
        labels = {L_CLAIM_UID: md["uid"], L_LAUNCH: "cold",
                  L_TEMPLATE_REF: name_hash(template["metadata"]["name"])}
        created_by = (md.get("labels") or {}).get(L_CREATED_BY)
        if created_by:
            labels[L_CREATED_BY] = created_by
        pt_md = spec.setdefault("podTemplate", {}).setdefault("metadata", {})
        extra = claim["spec"].get("additionalPodMetadata") or {}
        for field in ("labels", "annotations"):
            if extra.get(field):
                pt_md.setdefault(field, {}).update(extra[field])
        pt_md.setdefault("labels", {}).update({L_CLAIM_UID: md["uid"],
                                               L_TEMPLATE_REF: labels[L_TEMPLATE_REF]})
        for env in claim["spec"].get("env") or []:
            for c in spec["podTemplate"].get("spec", {}).get("containers", []):
                if env.get("containerName") in (None, "", c.get("name")):
                    c.setdefault("env", []).append({"name": env["name"],
                                                    "value": env["value"]})
        self._secure_defaults(spec)
        sb = {"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
              "metadata": {"name": md["name"], "namespace": ns, "labels": labels,
                           "annotations": {A_TEMPLATE_REF: template["metadata"]["name"]},
                           "ownerReferences": [_owner_ref(claim, f"{EXT_GROUP}/v1beta1",
                                                          "SandboxClaim")]},
              "spec": spec}
        return self._try(f"sandbox {md['name']}", self.objects.create, self._info(SANDBOXES),
                         ns, sb)


def spec_forces_cold(spec):
    """Claims with env or volumeClaimTemplates bypass the warm pool."""
    return bool(spec.get("env") or spec.get("volumeClaimTemplates"))
