"""The kubernetes backend on a cluster that refuses what it would use (issue 36 item 3), in
namespaces of the run's fake whose RBAC refuses one thing each (harness.K8S_REFUSING): without
pods/attach executions are driven by exec and /health names the downgrade; without pods/exec
/health says what to grant; a warm pool whose pods cannot be created backs off (1 s, doubled)
instead of creating a pod every second."""

import time

from harness import E2ETestCase, wait_until

ATTACH_DOWNGRADE = "executions driven by the pod's agent over pods/attach"


def health(client):
    r = client.get("/health", timeout=10)
    return r.json or {}


class AttachRefusedTest(E2ETestCase):
    daemon_env = {"KUBERNETES_EXECUTOR_NAMESPACE": "no-attach", "WARM_POOL_SIZE": "1",
                  "WARM_POOL_SIZE_BASH": "1", "EGRESS_ALLOW_MAX": "example.com"}

    def downgrades(self):
        return wait_until(lambda: health(self.client).get("backend_downgrades"), 30, 0.2)

    def test_health_names_the_downgrade_and_its_fix_and_stays_ok(self):
        downgrades = self.downgrades()
        self.assertEqual([d["measure"][:len(ATTACH_DOWNGRADE)] for d in downgrades],
                         [ATTACH_DOWNGRADE], downgrades)
        self.assertIn("pods/attach", downgrades[0]["reason"])
        self.assertIn("grant get and create on pods/attach in namespace no-attach",
                      downgrades[0]["fix"])
        self.assertEqual(health(self.client)["status"], "ok")
        self.assertIn("execution pods run without the agent", self.daemon.log_since(0))

    def test_executions_run_in_pods_driven_by_exec(self):
        self.downgrades()
        # PID 1 is the waiting shell's sleep, not the agent; files, stdin and exit codes hold.
        staged = self.upload_ok("in.txt", b"staged\n")
        res = self.execute("tr '\\0' ' ' < /proc/1/cmdline; cat in.txt; read l; echo $l; exit 3",
                           language="bash", stdin="typed\n",
                           files=[{"path": "in.txt", "file_id": staged}])
        self.assertEqual(res["stdout"], "sleep infinity staged\ntyped\n", res)
        self.assertEqual(res["exit_code"], 3, res)
        res = self.execute("open('out.txt', 'w').write('made')\nprint(6 * 7)")
        self.assertEqual(res["stdout"], "42\n", res)
        self.assertEqual([f["path"] for f in res["files"]], ["out.txt"], res)
        res = self.execute("import time\ntime.sleep(30)", timeout_ms=1000)
        self.assertTrue(res["timed_out"], res)

    def test_egress_says_what_it_needs(self):
        self.downgrades()
        r = self.client.post_json("/v1/sessions", {"network": {"allow_out": ["example.com"]}})
        self.assertEqual(r.status, 503, r)
        self.assertIn("egress needs the pod's agent, reached over pods/attach", r.body.decode())

    def test_sessions_keep_their_state(self):
        self.downgrades()
        r = self.client.post_json("/v1/sessions", {"ttl_seconds": 120})
        self.assertEqual(r.status, 201, r)
        sid = r.json["session_id"]
        self.addCleanup(self.client.delete, f"/v1/sessions/{sid}")
        for code, out in (("x = 20", ""), ("x += 22\nprint(x)", "42\n")):
            r = self.client.post_json(f"/v1/sessions/{sid}/execute", {"code": code})
            self.assertEqual((r.status, r.json["stdout"]), (200, out), r)


class ExecRefusedTest(E2ETestCase):
    daemon_env = {"KUBERNETES_EXECUTOR_NAMESPACE": "no-exec", "WARM_POOL_SIZE": "0"}

    def test_health_names_what_to_grant(self):
        message = wait_until(lambda: health(self.client).get("message"), 30, 0.2)
        self.assertIn("may not get pods/exec or create pods/exec in namespace no-exec", message)
        self.assertIn("packaging/kubernetes/role.yaml", message)
        self.assertEqual(health(self.client)["status"], "error")


class PodsRefusedTest(E2ETestCase):
    daemon_env = {"KUBERNETES_EXECUTOR_NAMESPACE": "no-pods", "WARM_POOL_SIZE": "1"}

    def test_the_warm_pool_backs_off(self):
        failures = lambda: self.pool_metric("python", "fill_failures_total")  # noqa: E731
        first = wait_until(failures, 30, 0.05)
        self.assertGreaterEqual(first, 1)
        # Tries 1, 2, 4 s apart (a busy machine only spaces them more): at most two more within
        # 4 s of any failure; every second it would be four.
        time.sleep(4)
        self.assertLessEqual(failures() - first, 2)
        self.assertIn("next try in", self.daemon.log_since(0))
        r = self.client.post_json("/v1/execute", {"code": "print(1)"})
        self.assertEqual(r.status, 503, r)
        self.assertIn("forbidden", r.body.decode())
