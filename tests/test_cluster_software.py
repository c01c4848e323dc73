"""Cluster software as declared under the offline mocks."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from infra.config.errors import ConfigError
from infra.facts import versions
from offline.plan.runner import PlanResult, stack_config
from tests.fixture_project import FIXTURE_ROOT

RELEASE = "kubernetes:helm.sh/v3:Release"
NEURON_TOLERATION = {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}
BURN_IN_TOLERATION = {
    "key": "startup-taint.cluster-autoscaler.kubernetes.io/neuron-burn-in",
    "operator": "Exists",
    "effect": "NoSchedule",
}
ALL_OFF = {
    k: False
    for k in (
        "neuronDevicePlugin",
        "efaDevicePlugin",
        "fsxCsi",
        "volcano",
        "kuberay",
        "mpiOperator",
        "clusterAutoscaler",
        "metricsServer",
        "observability",
    )
}


def fixed_sizes() -> dict[str, object]:
    """With cluster-autoscaler off nothing resizes a managed group, so each gets a fixed size
    (desiredSize = maxSize); a group left to scale is refused (infra/config/aws_limits.py)."""
    groups = json.loads(stack_config(FIXTURE_ROOT, "dev")["trainium-eks:acceleratorNodeGroups"])
    return {
        "acceleratorNodeGroups": [{**g, "desiredSize": g["maxSize"]} for g in groups],
        "jobNodeGroup": {"desiredSize": 1, "maxSize": 1},
    }


def releases(plan: PlanResult) -> dict[str, dict]:
    return {r.name: r.inputs for r in plan.of_type(RELEASE)}


def tolerates_neuron(tolerations: list[dict]) -> bool:
    return any(
        t.get("operator") == "Exists"
        and t.get("key") in (None, "aws.amazon.com/neuron")
        and t.get("effect") in (None, "NoSchedule")
        for t in tolerations
    )


@pytest.mark.parametrize(
    ("release", "chart", "version", "repo", "namespace"),
    [
        ("neuron", "oci://public.ecr.aws/neuron/neuron-helm-chart", "1.9.0", None, "kube-system"),
        (
            "aws-efa-k8s-device-plugin",
            "aws-efa-k8s-device-plugin",
            "v0.5.30",
            "https://aws.github.io/eks-charts",
            "kube-system",
        ),
        (
            "aws-fsx-csi-driver",
            "aws-fsx-csi-driver",
            "1.17.0",
            "https://kubernetes-sigs.github.io/aws-fsx-csi-driver",
            "kube-system",
        ),
        ("volcano", "volcano", "1.15.1", "https://volcano-sh.github.io/helm-charts", "volcano-system"),
        (
            "kuberay-operator",
            "kuberay-operator",
            "1.7.0",
            "https://ray-project.github.io/kuberay-helm/",
            "kuberay-system",
        ),
        (
            "cluster-autoscaler",
            "cluster-autoscaler",
            "9.59.0",
            "https://kubernetes.github.io/autoscaler",
            "kube-system",
        ),
        (
            "metrics-server",
            "metrics-server",
            "3.13.1",
            "https://kubernetes-sigs.github.io/metrics-server/",
            "kube-system",
        ),
    ],
)
def test_release_chart_repository_and_exact_version(dev_fsx, release, chart, version, repo, namespace):
    inputs = releases(dev_fsx)[release]
    assert inputs["chart"] == chart
    assert inputs["version"] == version
    assert inputs.get("repositoryOpts", {}).get("repo") == repo
    assert inputs["namespace"] == namespace
    assert inputs["atomic"] is True


def test_volcano_is_a_release_whose_hooks_run(dev):
    """Why Volcano is a helm.v3.Release (not the webhooks: volcano-sh/volcano v1.15.1 has no
    pre-delete hook; templates/webhooks.yaml are ordinary objects that `helm uninstall` deletes).
    installer/helm/chart/volcano/templates/admission-init.yaml (v1.15.1): the Job
    `<release>-admission-init` is a `helm.sh/hook: pre-install,pre-upgrade` that runs
    gen-admission-secret.sh to create `basic.admission_secret_name`, which
    templates/admission.yaml mounts into the admission Deployment. pulumi_kubernetes 4.34.2
    helm/v4/Chart.py, `include_hooks`: hook resources are omitted from the rendered output and
    hooks are not supported outside render mode; helm/v3/Release.py `disable_webhooks`
    "Prevent hooks from running". A Chart, or a Release with hooks off, leaves the admission pod
    without its certificate and every Volcano Job refused by a webhook with no server."""
    volcano = dev.named("volcano")
    assert volcano.type == RELEASE
    assert not volcano.inputs.get("disableWebhooks") and not volcano.inputs.get("disableCRDHooks")
    assert not dev.of_type("kubernetes:helm.sh/v4:Chart")


def test_neuron_chart_is_new_enough():
    major, minor, patch = map(int, versions.CHARTS["neuron"].version.split("."))
    assert (major, minor, patch) >= (1, 1, 1)


def test_every_kubernetes_resource_uses_the_cluster_provider(dev):
    on_cluster = [r for r in dev.registrations if r.type.startswith("kubernetes:")]
    assert on_cluster
    assert all("pulumi:providers:kubernetes::cluster::" in r.provider for r in on_cluster)


def test_daemonsets_for_accelerator_nodes_tolerate_the_neuron_taint(dev_fsx):
    values = {name: r["values"] for name, r in releases(dev_fsx).items()}
    assert values["neuron"]["devicePlugin"]["enabled"] is True
    assert tolerates_neuron(values["neuron"]["devicePlugin"]["tolerations"])
    assert tolerates_neuron(values["neuron"]["npd"]["tolerations"])
    # And the burn-in's taint, which a new node keeps until the devices these plugins advertise pass.
    assert values["aws-efa-k8s-device-plugin"]["tolerations"] == [NEURON_TOLERATION, BURN_IN_TOLERATION]
    assert values["aws-efa-k8s-device-plugin"]["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true"}
    assert values["aws-fsx-csi-driver"]["node"]["tolerateAllTaints"] is True


def test_efa_plugin_image_comes_from_the_clusters_own_region(dev, prod):
    """aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.30: values.yaml defaults
    image.repository to 602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin and
    templates/daemonset.yaml pulls `{{ .Values.image.repository }}:{{ .Values.image.tag | default
    .Chart.AppVersion }}`. EKS replicates its add-on images to a registry in each region (EKS user
    guide, "View Amazon container image registries for Amazon EKS add-ons"): prod (us-east-2)
    pulls from us-east-2, not across regions."""
    for plan, host in (
        (dev, "602401143452.dkr.ecr.us-west-2.amazonaws.com"),
        (prod, "602401143452.dkr.ecr.us-east-2.amazonaws.com"),
    ):
        image = releases(plan)["aws-efa-k8s-device-plugin"]["values"]["image"]
        assert image == {"repository": f"{host}/eks/aws-efa-k8s-device-plugin"}


def test_eks_addon_registry_table():
    """The table copies the EKS user guide page "View Amazon container image registries for Amazon
    EKS add-ons" (awsdocs/amazon-eks-user-guide latest/ug/workloads/add-ons-images.adoc): the
    account is 602401143452 in the older commercial regions and differs in opt-in regions, China
    and GovCloud, whose registries also live under other domains."""
    import re

    table = versions.EKS_ADDON_REGISTRIES
    host = re.compile(r"^([0-9]{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.(com|com\.cn|eu)$")
    for region, registry in table.items():
        match = host.fullmatch(registry)
        assert match, registry
        # The page lists ap-east-2's registry under an ap-east-1 host; every other host is in its region.
        assert match[2] == region or (region, match[2]) == ("ap-east-2", "ap-east-1")
    account = {region: registry.split(".")[0] for region, registry in table.items()}
    assert account["us-west-2"] == account["us-east-1"] == account["us-east-2"] == "602401143452"
    assert account["af-south-1"] == "877085696533" and account["ap-southeast-3"] == "296578399912"
    assert account["us-gov-west-1"] == "013241004608" and table["cn-north-1"].endswith(".amazonaws.com.cn")
    # Every region this project offers Trainium in (the offline zone table) has a registry.
    from offline.plan import fixtures

    assert set(fixtures.ZONES) <= set(table)


def test_efa_plugin_selects_the_label_the_node_groups_carry(dev):
    selector = releases(dev)["aws-efa-k8s-device-plugin"]["values"]["nodeSelector"]
    for group in dev.outputs["acceleratorNodeGroups"]:
        assert selector.items() <= group["labels"].items()


def test_neuron_scheduler_extension_is_an_option(dev, plan_with):
    assert releases(dev)["neuron"]["values"]["scheduler"]["enabled"] is False
    plan = plan_with(features={"neuronSchedulerExtension": True})
    assert releases(plan)["neuron"]["values"]["scheduler"]["enabled"] is True


def test_kuberay_uses_volcano_and_is_installed_after_it(dev, plan_with):
    """ray-project/kuberay v1.7.0, ray-operator/controllers/ray/batchscheduler/volcano/
    volcano_scheduler.go: with `batchScheduler.name: volcano`, ConfigureReconciler registers
    `b.Owns(&volcanoschedulingv1beta1.PodGroup{})`, a watch the manager cannot start while the
    PodGroup CRD is missing, so the operator crash-loops until Volcano's CRDs exist.
    volcano-sh/volcano v1.15.1, installer/helm/chart/volcano/templates/scheduling_v1beta1_podgroup.yaml
    renders the PodGroup CRD as an ordinary template, which Helm applies only after the
    pre-install hook Job of templates/admission-init.yaml has finished. So the KubeRay release
    waits for the Volcano release (atomic: its objects are ready) when Volcano is on, and for
    nothing when it is off."""
    kuberay, volcano = dev.named("kuberay-operator"), dev.named("volcano")
    assert kuberay.inputs["values"]["batchScheduler"] == {"name": "volcano"}
    assert volcano.urn in kuberay.dependencies
    plan = plan_with(features={"volcano": False})
    assert "batchScheduler" not in releases(plan)["kuberay-operator"]["values"]
    assert "volcano" not in releases(plan)
    assert plan.named("kuberay-operator").dependencies == []


def test_cluster_autoscaler(dev):
    values = releases(dev)["cluster-autoscaler"]["values"]
    assert values["cloudProvider"] == "aws"
    assert values["awsRegion"] == "us-west-2"
    assert values["autoDiscovery"] == {
        "clusterName": "trn-dev",
        "tags": ["k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/trn-dev"],
    }
    association = dev.named("autoscaling-cluster-autoscaler-identity")
    assert values["rbac"]["serviceAccount"]["name"] == association.inputs["serviceAccount"] == "cluster-autoscaler"
    assert association.inputs["namespace"] == "kube-system"
    policy = json.loads(dev.named("autoscaling-cluster-autoscaler-policy").inputs["policy"])
    scale = next(s for s in policy["Statement"] if "autoscaling:SetDesiredCapacity" in s["Action"])
    assert scale["Condition"] == {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/trn-dev": "owned"}}


def test_controllers_run_on_core_nodes(dev_fsx):
    values = {name: r["values"] for name, r in releases(dev_fsx).items()}
    assert values["volcano"]["custom"]["default_ns"] == {"role": "core"}
    for name in ("kuberay-operator", "cluster-autoscaler", "metrics-server"):
        assert values[name]["nodeSelector"] == {"role": "core"}
    assert values["aws-fsx-csi-driver"]["controller"]["nodeSelector"] == {"role": "core"}


# --- storage ------------------------------------------------------------------------------------

LUSTRE = {(988, 988), (1018, 1023)}


def lustre_rules(plan: PlanResult) -> list[dict]:
    kinds = (
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
    )
    return [r.inputs for kind in kinds for r in plan.of_type(kind) if r.name.startswith("fsx-")]


def test_lustre_ports_both_ways_between_file_system_and_nodes(dev_fsx):
    rules = lustre_rules(dev_fsx)
    assert {(r["fromPort"], r["toPort"]) for r in rules} == LUSTRE
    assert all(r["ipProtocol"] == "tcp" and "cidrIpv4" not in r for r in rules)
    lustre, nodes = "sg-placeholder-fsx-lustre", "sg-placeholder-eks-cluster"
    pairs = {(r["securityGroupId"], r["referencedSecurityGroupId"], r["fromPort"]) for r in rules}
    for low, _ in LUSTRE:
        assert {(lustre, lustre, low), (lustre, nodes, low), (nodes, lustre, low)} <= pairs
    assert len(rules) == 3 * 2 * 2


def test_fsx_controller_identity(dev_fsx):
    association = dev_fsx.named("fsx-csi-controller-identity")
    assert association.inputs["serviceAccount"] == "fsx-csi-controller-sa"
    controller_sa = releases(dev_fsx)["aws-fsx-csi-driver"]["values"]["controller"]["serviceAccount"]
    assert controller_sa == {"create": True, "name": "fsx-csi-controller-sa"}
    # never on the node role
    node_policies = [
        r.inputs["policyArn"] for r in dev_fsx.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    ]
    assert not any("FSx" in arn for arn in node_policies)


# --- schedulers ----------------------------------------------------------------------------------


def test_volcano_queues(dev):
    queues = {r.inputs["metadata"]["name"]: r for r in dev.registrations if r.type.endswith(":Queue")}
    assert set(queues) == {"test", "llama2-training-queue"}
    assert queues["llama2-training-queue"].inputs["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert queues["llama2-training-queue"].inputs["spec"] == {
        "weight": 1,
        "reclaimable": True,
        "capability": {"cpu": "500", "memory": "1500Gi"},
    }
    assert "capability" not in queues["test"].inputs["spec"]
    assert all(dev.named("volcano").urn in q.dependencies for q in queues.values())
    # The workload stacks check a job's total requests against these caps (Volcano's proportion
    # plugin refuses to allocate beyond a queue's capability: a bigger gang never starts).
    assert dev.outputs["volcanoQueues"] == [
        {"name": "test", "capability": {}},
        {"name": "llama2-training-queue", "capability": {"cpu": "500", "memory": "1500Gi"}},
    ]


def test_volcano_images_are_not_pulled_on_every_start(dev):
    """volcano-sh/volcano v1.15.1 installer/helm/chart/volcano/values.yaml: `basic.image_pull_policy:
    "Always"` and `basic.image_registry: "docker.io"`; every container of the chart's templates
    (admission-init.yaml, admission.yaml, controllers.yaml, scheduler.yaml, agent*.yaml,
    kubestatemetrics.yaml) sets `imagePullPolicy: {{ .Values.basic.image_pull_policy }}`. Left at
    Always, each restart pulls from Docker Hub anonymously through the NAT gateway (rate limits,
    slow starts); the tags are pinned, so a cached copy is the same image. The MPI operator
    (mpioperator/mpi-operator, Docker Hub) gets the same policy in its manifest's transform."""
    basic = releases(dev)["volcano"]["values"]["basic"]
    assert basic == {"image_pull_policy": "IfNotPresent"}
    assert "image_registry" not in basic  # no pull-through cache: see README, Cluster software


def test_no_rendezvous_server_runs_in_the_cluster(dev):
    # Rank 0's torchrun hosts the rendezvous store of every BERT and `torchx run` job.
    assert not [r.name for r in dev.registrations if "etcd" in r.name]
    assert "etcdEndpoints" not in dev.outputs


def test_mpi_operator_release_manifest(dev):
    config_file = dev.named("mpi-operator")
    assert config_file.type == "kubernetes:yaml/v2:ConfigFile"
    assert (
        config_file.inputs["file"]
        == "https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.8.2/deploy/v2beta1/mpi-operator.yaml"
    )


def test_mpi_operator_runs_the_release_image_not_the_moving_minor_tag(dev, plan_with):
    """kubeflow/mpi-operator v0.8.2 (release-0.8 b10758d) deploy/v2beta1/mpi-operator.yaml names
    `mpioperator/mpi-operator:0.8`, which its image workflow (.github/workflows/mpi-operator-docker-
    image-publish.yml, type=semver {{major}}.{{minor}}) moves to every later 0.8.x: the Deployment runs
    `:0.8.2`, with Volcano (plus the flag) and without it."""
    import pulumi

    from infra.components.schedulers import mpi_operator_gang_scheduling, mpi_operator_release_image

    assert versions.MPI_OPERATOR_IMAGE == "mpioperator/mpi-operator:0.8.2"
    upstream = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "mpi-operator", "namespace": "mpi-operator"},
        "spec": {"template": {"spec": {"containers": [
            {"name": "mpi-operator", "image": "mpioperator/mpi-operator:0.8",
             "args": ["-alsologtostderr", "--lock-namespace=mpi-operator"]},
        ]}}},
    }  # fmt: skip
    for transform, args in (
        (mpi_operator_release_image, ["-alsologtostderr", "--lock-namespace=mpi-operator"]),
        (
            mpi_operator_gang_scheduling,
            ["-alsologtostderr", "--lock-namespace=mpi-operator", "--gang-scheduling=volcano"],
        ),
    ):
        result = transform(
            pulumi.ResourceTransformArgs(
                True, "kubernetes:apps/v1:Deployment", "mpi-operator/mpi-operator", upstream, pulumi.ResourceOptions()
            )
        )
        (container,) = result.props["spec"]["template"]["spec"]["containers"]
        assert container["image"] == "mpioperator/mpi-operator:0.8.2"
        assert container["args"] == args
        assert container["imagePullPolicy"] == "IfNotPresent"
    assert upstream["spec"]["template"]["spec"]["containers"][0]["image"] == "mpioperator/mpi-operator:0.8"
    # Without Volcano the manifest still has a transform: the image one.
    plain = plan_with(features={"volcano": False}).named("mpi-operator")
    assert plain.lifecycle["transforms"] == 1


def test_mpi_operator_gang_schedules_with_volcano(dev, plan_with):
    """kubeflow/mpi-operator v0.8.2: cmd/mpi-operator/app/options/options.go reads
    `--gang-scheduling`; "volcano" selects NewVolcanoCtrl (pkg/controller/mpi_job_controller.go),
    which creates a PodGroup per MPIJob and sets schedulerName volcano and the
    scheduling.k8s.io/group-name annotation on launcher and worker pods (pkg/controller/podgroup.go).
    Without the flag MPIJob pods go to the default scheduler and skip Volcano's gang.
    deploy/v2beta1/mpi-operator.yaml's container `mpi-operator` has args [-alsologtostderr,
    --lock-namespace=mpi-operator]. The flag is added by a transform of the manifest's own
    Deployment: a separate server-side-apply patch would contend with the manifest's field
    manager for the atomic args list on every refresh or manifest upgrade."""
    import pulumi

    from infra.components.schedulers import mpi_operator_gang_scheduling

    manifest = dev.named("mpi-operator")
    assert manifest.type == "kubernetes:yaml/v2:ConfigFile"
    assert manifest.lifecycle["transforms"] == 1
    assert dev.named("volcano").urn in manifest.dependencies
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "mpi-operator", "namespace": "mpi-operator"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "mpi-operator",
                            "image": "mpioperator/mpi-operator:0.8",
                            "args": ["-alsologtostderr", "--lock-namespace=mpi-operator"],
                        }
                    ]
                }
            }
        },
    }
    opts = pulumi.ResourceOptions()
    result = mpi_operator_gang_scheduling(
        pulumi.ResourceTransformArgs(
            True, "kubernetes:apps/v1:Deployment", "mpi-operator/mpi-operator", deployment, opts
        )
    )
    (container,) = result.props["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["-alsologtostderr", "--lock-namespace=mpi-operator", "--gang-scheduling=volcano"]
    assert container["image"] == "mpioperator/mpi-operator:0.8.2"
    assert container["imagePullPolicy"] == "IfNotPresent"
    # The input object is left as it was; other objects are not touched.
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "-alsologtostderr",
        "--lock-namespace=mpi-operator",
    ]
    other = pulumi.ResourceTransformArgs(
        True, "kubernetes:core/v1:ServiceAccount", "sa", {"metadata": {"name": "mpi-operator"}}, opts
    )
    assert mpi_operator_gang_scheduling(other) is None
    # Without Volcano the manifest keeps only the image transform (the test above), and waits for nothing.
    without_volcano = plan_with(features={"volcano": False}).named("mpi-operator")
    assert without_volcano.dependencies == []


# --- identities, registries, observability -------------------------------------------------------


def role_arn(role) -> str:
    """The ARN the offline mocks give a role (offline/plan/mocks.py: its name, with a placeholder suffix)."""
    return f"arn:aws:iam::123456789012:role/{role.name}-placeholder"


def test_training_service_account_and_s3_read(dev, plan_with):
    sa = dev.named("default-training-sa").inputs
    assert sa["metadata"] == {"name": "training", "namespace": "default"}
    association = dev.named("default-training-identity").inputs
    assert (association["namespace"], association["serviceAccount"]) == ("default", "training")
    assert not [r for r in dev.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "training-default-role-policy"]
    plan = plan_with(
        trainingNamespaces=["default", "research"],
        namespaceIds={"default": 20001, "research": 20002},
        trainingDataBuckets=["shared-data"],
        namespaceDataBuckets={"research": ["research-data"]},
    )

    def reads(namespace: str) -> list[str]:
        policy = json.loads(plan.named(f"training-{namespace}-role-policy").inputs["policy"])
        assert policy["Statement"][1]["Action"] == ["s3:GetObject"]
        return policy["Statement"][1]["Resource"]

    # One role per namespace, each reading only its own buckets.
    assert reads("default") == ["arn:aws:s3:::shared-data/*"]
    assert reads("research") == ["arn:aws:s3:::research-data/*"]
    roles = {r.name: r for r in plan.of_type("aws:iam/role:Role")}
    for namespace in ("default", "research"):
        association = plan.named(f"{namespace}-training-identity").inputs
        assert association["roleArn"] == role_arn(roles[f"training-{namespace}-role"])
        trust = json.loads(roles[f"training-{namespace}-role"].inputs["assumeRolePolicy"])
        assert trust["Statement"][0]["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"] == namespace


def test_every_pod_identity_role_trusts_only_this_account_cluster_and_service_account(dev, dev_fsx, prod):
    """EKS user guide (awsdocs/amazon-eks-user-guide, latest/ug/manage-access/aws-access/pod-id-role.adoc
    and pod-id-abac.adoc): Pod Identity assumes the role with sts:TagSession and the session tags
    eks-cluster-arn, kubernetes-namespace and kubernetes-service-account, which the trust policy
    may require; aws:SourceAccount names the account. Every role trusted by pods.eks.amazonaws.com
    requires all four, and the namespace and service account are those of its association."""
    # Dev on EFS has one role fewer: its CSI driver runs no controller, so has no identity.
    for plan, least in ((dev, 4), (dev_fsx, 5), (prod, 5)):
        associations = [
            (r.inputs["namespace"], r.inputs["serviceAccount"], r.inputs["roleArn"])
            for r in plan.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        ]
        associations += [
            ("", a["serviceAccount"], a["roleArn"])
            for r in plan.of_type("aws:eks/addon:Addon")
            for a in r.inputs.get("podIdentityAssociations", [])
        ]
        pod_roles = {}
        for role in plan.of_type("aws:iam/role:Role"):
            trust = json.loads(role.inputs["assumeRolePolicy"])
            (statement,) = trust["Statement"]
            if statement["Principal"] != {"Service": "pods.eks.amazonaws.com"}:
                continue
            pod_roles[role_arn(role)] = statement["Condition"]["StringEquals"]
        assert len(pod_roles) >= least, plan.stack
        for namespace, account, arn in associations:
            condition = pod_roles[arn]
            assert condition["aws:SourceAccount"] == "123456789012"
            assert (
                condition["aws:RequestTag/eks-cluster-arn"]
                == f"arn:aws:eks:{plan.outputs['region']}:123456789012:cluster/{plan.outputs['clusterName']}"
            )
            assert condition["aws:RequestTag/kubernetes-service-account"] == account
            assert namespace in ("", condition["aws:RequestTag/kubernetes-namespace"])


def test_ecr_repositories(dev, prod):
    repos = {r.inputs["name"]: r.inputs for r in dev.of_type("aws:ecr/repository:Repository")}
    # The training images', and the pull-through cache's for the burn-in's DLC, the CSI driver's node
    # images (dev's file system is EFS: its driver's), the Neuron chart's, neuron-monitor's and the Python
    # image of the EFA exporter (tests/test_image_delivery.py).
    assert set(repos) == {
        "trn-dev/bert-pretrain",
        "trn-dev/cmd-shell",
        "trn-dev/ray-llama2",
        "trn-dev/nxd-llama",
        "trn-dev/ecr-public/neuron/pytorch-training-neuronx",
        "trn-dev/ecr-public/efs-csi-driver/amazon/aws-efs-csi-driver",
        "trn-dev/ecr-public/csi-components/livenessprobe",
        "trn-dev/ecr-public/csi-components/csi-node-driver-registrar",
        "trn-dev/ecr-public/neuron/neuron-device-plugin",
        "trn-dev/ecr-public/neuron/neuron-dra-driver",
        "trn-dev/ecr-public/neuron/neuron-node-recovery",
        "trn-dev/ecr-public/neuron/neuron-monitor",
        "trn-dev/ecr-public/docker/library/python",
    }
    for repo in repos.values():
        assert repo["imageTagMutability"] == "IMMUTABLE"
        assert repo["imageScanningConfiguration"] == {"scanOnPush": True}
        assert repo["forceDelete"] is True
    # Pruning for the pushed images only: the cache's hold multi-architecture children no rule may expire.
    pruned = {r.inputs["repository"] for r in dev.of_type("aws:ecr/lifecyclePolicy:LifecyclePolicy")}
    assert pruned == {f"trn-dev/{name}" for name in ("bert-pretrain", "cmd-shell", "ray-llama2", "nxd-llama")}
    # In prod only the cache's repositories go with the stack: what they hold can be pulled again.
    kept = {r.inputs["name"] for r in prod.of_type("aws:ecr/repository:Repository") if not r.inputs["forceDelete"]}
    assert kept == {f"trn-prod/{name}" for name in ("bert-pretrain", "cmd-shell", "ray-llama2", "nxd-llama")}
    assert (
        dev.outputs["ecrRepositories"]["bert-pretrain"]
        == "123456789012.dkr.ecr.us-west-2.amazonaws.com/trn-dev/bert-pretrain"
    )


def test_observability(dev):
    addon = dev.named("observability-amazon-cloudwatch-observability").inputs
    assert addon["addonName"] == "amazon-cloudwatch-observability"
    assert addon["podIdentityAssociations"][0]["serviceAccount"] == "cloudwatch-agent"
    body = json.loads(dev.named("observability-neuron").inputs["dashboardBody"])
    expressions = [w["properties"]["metrics"][0][0]["expression"] for w in body["widgets"]]
    assert any("node_neuroncore_utilization" in e and 'ClusterName="trn-dev"' in e for e in expressions)
    assert dev.outputs["cloudwatchDashboard"] == "trn-dev-neuron"


# --- switches -------------------------------------------------------------------------------------


def test_switches_off_remove_what_they_guard(plan_with):
    plan = plan_with(features=ALL_OFF, **fixed_sizes())
    assert not plan.of_type(RELEASE)
    assert not plan.of_type("kubernetes:yaml/v2:ConfigFile")
    assert not [r for r in plan.registrations if r.type.endswith(":Queue")]
    assert not [
        r
        for r in plan.registrations
        if r.type.startswith("kubernetes:")
        and r.type.endswith((":Deployment", ":Service", ":StorageClass", ":PersistentVolumeClaim"))
    ]
    assert not plan.of_type("aws:cloudwatch/dashboard:Dashboard")
    assert not plan.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
    assert not [r for r in plan.of_type("aws:eks/addon:Addon") if "cloudwatch" in r.name]
    assert not [r for r in plan.registrations if r.name.startswith(("fsx-", "autoscaling-"))]
    assert plan.outputs["storage"]["enabled"] is False
    assert plan.outputs["volcanoQueues"] == []


@pytest.mark.parametrize(
    ("feature", "gone"),
    [
        ("neuronDevicePlugin", "neuron"),
        ("efaDevicePlugin", "aws-efa-k8s-device-plugin"),
        ("kuberay", "kuberay-operator"),
        ("clusterAutoscaler", "cluster-autoscaler"),
        ("metricsServer", "metrics-server"),
        ("fsxCsi", "aws-fsx-csi-driver"),
    ],
)
def test_each_switch(plan_with, feature, gone):
    plan = plan_with(features={feature: False}, **(fixed_sizes() if feature == "clusterAutoscaler" else {}))
    assert gone not in releases(plan)
    assert len(releases(plan)) == 6


def test_the_etcd_switch_is_gone(plan_with):
    # TorchX and the BERT jobs meet at the c10d store rank 0's torchrun hosts (workloads/bert_launch.py).
    with pytest.raises(ConfigError, match=r"features.torchxEtcd: unknown key"):
        plan_with(features={"torchxEtcd": True})


# --- outputs --------------------------------------------------------------------------------------


def test_outputs_are_the_complete_contract(dev):
    expected = {
        "clusterName",
        "region",
        "kubeconfig",
        "vpcId",
        "nodeSubnetIds",
        "oidcProviderArn",
        "oidcProviderUrl",
        "clusterSecurityGroupId",
        "nodeRoleArn",
        "acceleratorZone",
        "acceleratorNodeGroups",
        "features",
        "trainingNamespaces",
        "namespaceIds",
        "trainingServiceAccount",
        "storage",
        "volcanoQueues",
        "ecrRepositories",
        "podIdentity",
        "coreNodeSelector",
        "jobSupportPlacement",
        "cloudwatchDashboard",
        "addonBuilds",
    }
    assert set(dev.outputs) == expected
    assert dev.outputs["namespaceIds"] == {"default": 20001}  # namespaceIds' default
    storage = dev.outputs["storage"]
    assert storage["claimName"] == "fsx-claim" and storage["namespaces"] == ["default"]
    assert storage["claims"] == {"default": "fsx-claim-default"}  # its own directory, the workloads' claim name
    # Dev's file system is EFS: no Lustre name, capacity or tier, and the save throughput the goodput model takes.
    fs_id = storage["fileSystemId"]
    assert storage["kind"] == "efs" and re.fullmatch(r"fs-[0-9a-f]{8,40}", fs_id)
    assert storage["dnsName"] == f"{fs_id}.efs.us-west-2.amazonaws.com"
    assert storage["mountName"] is None and storage["capacityGib"] is None and storage["deploymentType"] is None
    assert storage["throughputMbps"] == 1073.7


def test_the_outputs_cover_what_the_workload_stacks_read(dev) -> None:
    from infra.contract import WORKLOAD_INPUTS

    assert set(WORKLOAD_INPUTS) <= set(dev.outputs)
    assert dev.outputs["coreNodeSelector"] == {"role": "core"}


def test_volcano_scheduler_creates_gang_pods_before_the_nodes_exist(dev):
    """volcano-sh/volcano v1.15.1:
    - installer/helm/chart/volcano/templates/scheduler.yaml writes `custom.scheduler_config_override`
      verbatim as volcano-scheduler.conf; the default conf (config/volcano-scheduler.conf) lists
      `enqueue, allocate, backfill`.
    - pkg/controllers/job/job_controller_actions.go (syncJob) creates a Job's pods only once its
      PodGroup has left Pending; with `enqueue`, the proportion/overcommit plugins keep it Pending
      while its minResources exceed what the nodes have now - with Trainium groups at zero, forever,
      and cluster-autoscaler never sees an unschedulable pod (volcano-sh/volcano#3910).
    - pkg/scheduler/actions/allocate/allocate.go (buildAllocateContext): when `enqueue` is not
      configured, a Pending PodGroup is moved to Inqueue there, so pods are created; allocate then
      commits a job's statement only if ssn.JobReady (gang plugin: minAvailable tasks placed), so no
      partial gang binds, and pkg/scheduler/cache/cache.go (RecordJobStatusEvent/taskUnschedulable)
      marks the waiting pods PodScheduled=False with the reason from pkg/scheduler/api/job_info.go
      (TaskSchedulingReason: Unschedulable for pending tasks, "to support cluster autoscaler").
    This holds for BERT's Volcano Jobs and the RayJobs' PodGroups (KubeRay creates pods directly;
    without `enqueue` their Pending PodGroup is moved to Inqueue the same way).
    """
    conf = yaml.safe_load(releases(dev)["volcano"]["values"]["custom"]["scheduler_config_override"])
    actions = [a.strip() for a in conf["actions"].split(",")]
    assert actions == ["allocate", "backfill"]
    plugins = [p["name"] for tier in conf["tiers"] for p in tier["plugins"]]
    # gang keeps minAvailable at allocate; proportion keeps each queue within its capability.
    assert {"gang", "proportion", "predicates", "priority"} <= set(plugins)
