"""infra/: generated manifests are current and safe, Terraform grants nothing on the weights,
alert rules pass promtool's unit tests, and dashboards and alerts name metrics we export."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import hcl2
import pytest
import yaml

from sentinel import k8s, metrics
from sentinel.jobs import load_jobs
from tests.conftest import REPO

INFRA = REPO / "infra"
PROMTOOL = shutil.which("promtool")


def manifests(name: str) -> list[dict[str, Any]]:
    text = (INFRA / "k8s" / name).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def walk(value: Any) -> Any:
    """Every (key, value) pair in a nested structure."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key, inner
            yield from walk(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from walk(inner)


def test_committed_manifests_match_the_jobs() -> None:
    rendered = k8s.render(load_jobs(REPO / "jobs"), k8s.Settings())
    for name, text in rendered.items():
        committed = (INFRA / "k8s" / name).read_text(encoding="utf-8")
        assert committed == text, f"infra/k8s/{name} is stale: run `sentinel jobs render-k8s`"


def test_render_check_flags_stale_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    jobs = str(REPO / "jobs")
    assert cli("jobs", "render-k8s", "--jobs-dir", jobs, "--out", "k8s").exit_code == 0
    assert cli("jobs", "render-k8s", "--jobs-dir", jobs, "--out", "k8s", "--check").exit_code == 0
    (tmp_path / "k8s" / "cronjobs.yaml").write_text("# edited\n", encoding="utf-8")
    result = cli("jobs", "render-k8s", "--jobs-dir", jobs, "--out", "k8s", "--check")
    assert result.exit_code == 1
    assert "out of date: cronjobs.yaml" in result.stderr


def check_pod(pod: dict[str, Any]) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["automountServiceAccountToken"] is False
    for volume in pod["volumes"]:
        assert "hostPath" not in volume
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
        assert {"cpu", "memory"} <= set(container["resources"]["limits"])
        for env in container["env"]:
            if re.search(r"SECRET|TOKEN|KEY|PASSWORD", env["name"]):
                assert "value" not in env, f"{env['name']} must come from a Secret"
                assert env["valueFrom"]["secretKeyRef"]["name"] == "sentinel"


def test_every_job_has_a_safe_cronjob() -> None:
    jobs = {job.name: job for job in load_jobs(REPO / "jobs")}
    cronjobs = manifests("cronjobs.yaml")
    assert {c["metadata"]["name"] for c in cronjobs} == {f"sentinel-{n}" for n in jobs}
    for cron in cronjobs:
        job = jobs[cron["metadata"]["name"].removeprefix("sentinel-")]
        spec = cron["spec"]
        assert spec["concurrencyPolicy"] == "Forbid"
        assert spec["schedule"] == job.schedule
        template = spec["jobTemplate"]["spec"]
        assert template["backoffLimit"] == 0
        assert template["activeDeadlineSeconds"] >= job.timeout_seconds
        pod = template["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        assert pod["containers"][0]["args"][:2] == ["run", job.name]
        check_pod(pod)
    assert not [k for k, _ in walk(cronjobs) if k == "hostPath"]


def test_scheduler_deployment_service_and_network_policy() -> None:
    deployment, service = manifests("scheduler.yaml")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    pod = deployment["spec"]["template"]["spec"]
    check_pod(pod)
    container = pod["containers"][0]
    assert container["args"][0] == "schedule"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert service["spec"]["ports"][0]["name"] == "metrics"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    account, pvc, policy = manifests("common.yaml")
    assert account["automountServiceAccountToken"] is False
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    for rule in policy["spec"]["egress"]:
        assert rule["ports"], "every egress rule names its ports"
        for peer in rule["to"]:
            block = peer.get("ipBlock")
            if block and block["cidr"] == "0.0.0.0/0":
                assert "10.0.0.0/8" in block["except"]
                assert [p["port"] for p in rule["ports"]] == [443]


def unquote(value: Any) -> Any:
    """python-hcl2 keeps string quotes and marks blocks; strip both for plain comparisons."""
    if isinstance(value, dict):
        return {unquote(k): unquote(v) for k, v in value.items() if k != "__is_block__"}
    if isinstance(value, list):
        return [unquote(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def terraform() -> dict[str, dict[str, Any]]:
    """type -> name -> body for every resource and data source in infra/terraform."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((INFRA / "terraform").glob("*.tf")):
        with path.open(encoding="utf-8") as handle:
            parsed = unquote(hcl2.load(handle))
        for kind in ("resource", "data"):
            for block in parsed.get(kind, []):
                for rtype, named in block.items():
                    for name, body in named.items():
                        found.setdefault(rtype, {})[name] = body
    return found


def test_cloudtrail_logs_weight_object_events_and_management_events() -> None:
    trail = terraform()["aws_cloudtrail"]["weights"]
    selectors = trail["advanced_event_selector"]
    fields = [{f["field"]: f for f in s["field_selector"]} for s in selectors]
    assert any(f["eventCategory"]["equals"] == ["Management"] for f in fields)
    data = next(f for f in fields if f["eventCategory"]["equals"] == ["Data"])
    assert data["resources.type"]["equals"] == ["AWS::S3::Object"]
    assert data["resources.ARN"]["starts_with"] == "${local.weight_object_arns}"


def test_sentinel_iam_reads_logs_and_is_denied_the_weights() -> None:
    tf = terraform()
    statements = tf["aws_iam_policy_document"]["sentinel"]["statement"]
    weight_refs = ("weight_bucket_arns", "weight_object_globs", "weight_object_arns",
                   "aws_weight_buckets")  # fmt: skip
    for statement in statements:
        text = json.dumps(statement)
        if statement.get("effect", "Allow") == "Allow":
            assert not any(ref in text for ref in weight_refs), statement["sid"]
            assert "*" not in statement["actions"] and "s3:*" not in statement["actions"]
            assert all(r != "*" for r in statement["resources"]), statement["sid"]
    deny = next(s for s in statements if s.get("effect") == "Deny")
    assert deny["actions"] == ["s3:*"]
    assert "weight_bucket_arns" in json.dumps(deny) and "weight_object_globs" in json.dumps(deny)
    allowed = {a for s in statements if s.get("effect", "Allow") == "Allow" for a in s["actions"]}
    assert allowed == {"s3:ListBucket", "s3:GetObject", "s3:PutObject"}
    # GCP: log access only; no storage role anywhere in the weight projects
    gcp_project_roles = {b["role"] for b in tf["google_project_iam_member"].values()}
    assert gcp_project_roles == {"roles/logging.privateLogViewer"}
    sentinel_bucket_roles = [
        b for b in tf["google_storage_bucket_iam_member"].values()
        if "google_service_account.sentinel" in b["member"]
    ]  # fmt: skip
    assert [b["bucket"] for b in sentinel_bucket_roles] == ["${google_storage_bucket.sink.name}"]


def test_gcs_data_access_audit_sink_and_archive_lock() -> None:
    tf = terraform()
    audit = tf["google_project_iam_audit_config"]["gcs_data_access"]
    assert audit["service"] == "storage.googleapis.com"
    assert {c["log_type"] for c in audit["audit_log_config"]} >= {"DATA_READ", "DATA_WRITE"}
    sink = tf["google_logging_project_sink"]["gcs_audit"]
    assert 'protoPayload.serviceName=\\"storage.googleapis.com\\"' in sink["filter"]
    assert tf["aws_s3_bucket"]["archive"]["object_lock_enabled"] is True
    lock = tf["aws_s3_bucket_object_lock_configuration"]["archive"]
    assert lock["rule"][0]["default_retention"][0]["mode"] == "COMPLIANCE"


def exported_metric_names() -> set[str]:
    from sentinel.scheduler import Scheduler

    scheduler = Scheduler((), child_args=[], run_args=[], db_path="x", misfire_grace_seconds=1)
    names = {m.name for m in scheduler.registry.collect()} | set(metrics.STATE_HELP)
    return names | {f"{n}_total" for n in names}


def referenced(expr: str) -> set[str]:
    labels = {metrics.JOB_LABEL, "sentinel_role"}
    return set(re.findall(r"\bsentinel_[a-z_]+", expr)) - labels


def test_dashboard_and_alerts_name_only_exported_metrics() -> None:
    exported = exported_metric_names()
    dashboard = json.loads((INFRA / "grafana" / "sentinel.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    rules = yaml.safe_load((INFRA / "prometheus" / "alerts.yml").read_text(encoding="utf-8"))
    exprs += [r["expr"] for g in rules["groups"] for r in g["rules"]]
    used = set().union(*(referenced(e) for e in exprs))
    assert used - exported == set()
    assert "sentinel_job_last_success_timestamp_seconds" in used


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool from Debian's prometheus package")
def test_alert_rules_pass_promtool_unit_tests() -> None:
    directory = INFRA / "prometheus"
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]):
        done = subprocess.run(
            [str(PROMTOOL), *args], cwd=directory, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_dockerfile_runs_sentinel_as_non_root() -> None:
    text = (INFRA / "Dockerfile").read_text(encoding="utf-8")
    users = re.findall(r"^USER\s+(\S+)", text, flags=re.MULTILINE)
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \["sentinel"\]', text, flags=re.MULTILINE)
    assert "COPY jobs /app/jobs" in text
