"""What the cluster stack exports, as one typed model: the contract between the stacks.

The cluster program builds its outputs with ``exported`` (every field named, no other), the
workload program parses what its StackReference reads into ``ClusterContract``, and `make docs`
renders the fields' descriptions into docs/configuration.md. Keys are camelCase on the wire and
snake_case in Python, as in the config models (infra/config/base.py). tests/test_contract.py
reads the dev and prod plans' outputs back through ``ClusterOutputs`` and compares, so a key
exported and not modelled, or modelled and not exported, fails there.

The other stacks' outputs are read by people and the pipeline, never parsed by another program:
they stay descriptions (``WORKLOAD_OUTPUTS``, ``BOOTSTRAP_OUTPUTS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel
from typing_extensions import TypedDict

from infra.config.errors import ConfigError

# The node label the cluster stack sets to its nodeProvisioner (infra/specs/node_template.py
# node_labels); a group's own `labels` may use the key with other values, which stay selected on.
PROVISIONER_LABELS = frozenset({("provisioner", "cluster-autoscaler"), ("provisioner", "karpenter")})


class ContractModel(BaseModel):
    """camelCase keys on the wire, snake_case in Python. A key the model does not know is dropped
    when read, so a workload stack still reads a cluster stack deployed from a newer commit."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore")
    # Fields a stack exports only where they differ from their default, which is what stacks exporting
    # none of them meant: a stack that has no use for one keeps its outputs exactly as they were.
    exported_when_set: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _as_exported(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Written back as the stack exports it: a field ``exported_when_set`` at its default is left out."""
        data = handler(self)
        for name in self.exported_when_set:
            field = type(self).model_fields[name]
            if getattr(self, name) == field.default:
                data.pop(field.alias or name, None)
                data.pop(name, None)
        return data


def exported(model: type[ContractModel], **values: Any) -> dict[str, Any]:
    """``values`` (the model's field names; Pulumi Outputs allowed) keyed as the stack exports them.

    Every field must be given (but those ``exported_when_set``) and no other, so the cluster program
    cannot export a shape the model does not describe; the types are checked on the plan's values
    (tests/test_contract.py), since here they may still be Outputs."""
    fields = model.model_fields
    missing = [name for name in fields if name not in values and name not in model.exported_when_set]
    unknown = [name for name in values if name not in fields]
    if missing or unknown:
        raise TypeError(f"{model.__name__} output: missing {missing}, unknown {unknown}")
    return {fields[name].alias or name: value for name, value in values.items()}


class Zone(ContractModel):
    name: str = Field(description="The zone's name (`us-west-2d`), which differs by account.")
    id: str = Field(description="The zone's ID (`usw2-az4`), the same in every account.")


class Taint(ContractModel):
    key: str = Field(description="The taint's key.")
    value: str = Field(description="Its value.")
    effect: str = Field(description="`NoSchedule` or `NoExecute`.")

    def toleration(self) -> dict[str, str]:
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


# Plain dicts to the code that reads them, with their keys checked (pydantic validates TypedDicts; before
# Python 3.12 it needs typing_extensions'): a key renamed on one side fails the contract's round trip.
class Allocatable(TypedDict):
    cpu: str
    memory: str


class CapacityWindow(TypedDict):
    start: str
    end: str


class NodeGroup(ContractModel):
    """One accelerator node group, with what each of its nodes offers a pod."""

    name: str = Field(description="The group's name in the stack file.")
    instance_type: str = Field(description="Its EC2 instance type.")
    az_id: str = Field(description="The zone ID its nodes run in.")
    az_name: str = Field(description="That zone's name.")
    neuron_devices: int = Field(description="Neuron devices per node.")
    neuron_cores: int = Field(description="NeuronCores per node.")
    efa_interfaces: int = Field(description="EFA interfaces per node (0: no EFA).")
    labels: dict[str, str] = Field(default_factory=dict, description="The labels every node carries.")
    taints: list[Taint] = Field(default_factory=list, description="The taints training pods tolerate.")
    min_size: int = Field(description="The group's minimum node count.")
    max_size: int = Field(description="The group's maximum node count.")
    capacity_type: Literal["ON_DEMAND", "CAPACITY_BLOCK"] = Field(
        description="`CAPACITY_BLOCK` when the group launches into a Capacity Block (priced as such), else `ON_DEMAND`."
    )
    # None from cluster stacks that do not export it: only Neuron devices and EFA interfaces are checked then.
    allocatable: Allocatable | None = Field(
        default=None,
        description="`{cpu, memory}` a pod can request per node after the kubelet's reservations and the DaemonSets "
        "there; the workload stacks refuse pods that ask for more. Null for a type the cluster has no figures for.",
    )
    startup_taints: list[Taint] = Field(
        default_factory=list,
        description="Taints a new node starts with and loses once its burn-in passes (never tolerated by jobs).",
    )
    capacity_block: CapacityWindow | None = Field(
        default=None,
        description="`{start, end}` (RFC 3339) of the Capacity Block the group launches into, or null; the "
        "workload stacks refuse a run that cannot end before EKS scales the group to zero.",
    )
    resource_claim_template: str | None = Field(
        default=None,
        description="For a `deviceAllocation: dra` group, the ResourceClaimTemplate in every training namespace "
        "that claims one whole node (every Neuron device at LNC 2, and every EFA interface when the group has EFA): "
        "a pod names it in `resourceClaims` and its container in `resources.claims`, and requests no "
        "`aws.amazon.com/neuron` or `vpc.amazonaws.com/efa`. Null: the device plugins' extended resources.",
    )

    @property
    def burn_in(self) -> bool:
        """Whether each new node is burnt in before it takes a pod."""
        return bool(self.startup_taints)

    @property
    def node_selector(self) -> dict[str, str]:
        # The instance-type label is what TorchX selects on; the group's labels pin the group. All
        # but the `provisioner` label the stack sets itself: it names what starts the nodes, which
        # `nodeProvisioner` may switch under running jobs; pods that selected on it would stay Pending
        # after the switch until every workload stack is re-run (docs/provisioners.md, "Switching
        # provisioners"). Pods still read it (pods.pod_metadata) to annotate.
        return {
            "node.kubernetes.io/instance-type": self.instance_type,
            **{k: v for k, v in self.labels.items() if (k, v) not in PROVISIONER_LABELS},
        }

    @property
    def tolerations(self) -> list[dict[str, str]]:
        return [t.toleration() for t in self.taints]


class TrainingServiceAccount(ContractModel):
    name: str = Field(description="The service account jobs run as, in every training namespace.")
    role_arns: dict[str, str] = Field(description="Training namespace -> the IAM role its pods assume.")


class S3Link(ContractModel):
    path: str = Field(description="Where on the file system the bucket's objects appear.")
    s3_path: str = Field(description="The `s3://` prefix linked there.")


class Storage(ContractModel):
    enabled: bool = Field(
        description="Whether the file system exists (the `fsxCsi` feature); every other key "
        "but capacityGib, deploymentType and zone is null or empty when not."
    )
    exported_when_set: ClassVar[frozenset[str]] = frozenset({"kind", "throughput_mbps"})

    kind: Literal["fsx", "efs"] = Field(
        default="fsx",
        description="The file system's kind (cluster storage.kind): `fsx` (FSx for Lustre; what a stack that "
        "exports no kind has) or `efs` (Amazon EFS).",
    )
    # Null without a file system, and a null output never reaches a StackReference: the Pulumi SDK drops
    # None values both ways (pulumi 3.272.0 pulumi/runtime/rpc.py serialize_properties: "properties that
    # serialize to None" are treated "as if they don't exist"; deserialize_properties likewise), so these
    # default to None rather than being required.
    file_system_id: str | None = Field(default=None, description="The FSx for Lustre file system.")
    dns_name: str | None = Field(default=None, description="Its DNS name.")
    mount_name: str | None = Field(default=None, description="Its Lustre mount name.")
    storage_class: str | None = Field(default=None, description="The StorageClass of its volumes.")
    claim_name: str | None = Field(
        default=None,
        description="The name of each namespace's claim on the root (cluster storage.rootClaims) and the prefix of "
        "its directory claims; what a namespace mounts is in claims.",
    )
    namespaces: list[str] = Field(description="The namespaces that have a claim.")
    capacity_gib: int | None = Field(default=None, description="Its capacity; null for EFS, which has none.")
    deployment_type: str | None = Field(default=None, description="Its FSx deployment type; null for EFS.")
    # None from cluster stacks that do not export it, and for SCRATCH_2, which takes no per-unit setting.
    per_unit_storage_throughput: int | None = Field(
        default=None,
        description="Its baseline throughput per TiB of capacity (MB/s/TiB); the workloads' goodput model sizes "
        "checkpoint saves with it.",
    )
    throughput_mbps: float | None = Field(
        default=None,
        description="EFS: the aggregate write throughput (MB/s) a checkpoint save is modelled at, from EFS's "
        "published limits (infra/facts/efs.py); null for FSx, whose is capacityGib x perUnitStorageThroughput.",
    )
    zone: str = Field(description="The zone ID it is in (the accelerator zone; EFS serves every zone).")
    s3_links: list[S3Link] = Field(description="The S3 data repositories linked to it.")
    # Each claim is bound to a static volume of the one file system as soon as it exists.
    claims: dict[str, str] = Field(description="Namespace -> its claim's name.")


class VolcanoQueue(ContractModel):
    name: str = Field(description="The queue's name.")
    capability: dict[str, str] = Field(
        default_factory=dict, description='Its cap (`{cpu: "500", memory: "1500Gi"}`); empty: no cap.'
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, value: Any) -> Any:
        """Cluster stacks from before capabilities were exported list bare names: no cap known."""
        return {"name": value} if isinstance(value, str) else value


class JobSupportPlacement(ContractModel):
    node_selector: dict[str, str] = Field(description="The node selector of the job-support group.")
    # Kubernetes tolerations (core/v1 Toleration), which pods take as they come.
    tolerations: list[dict[str, str]] = Field(description="The tolerations a pod needs to run there.")
    # Both None from cluster stacks that do not export them.
    max_size: int | None = Field(default=None, description="The group's maximum node count.")
    allocatable: Allocatable | None = Field(
        default=None,
        description="`{cpu, memory}` each node leaves to pods (with several instance types, the smallest's).",
    )


class PodIdentity(ContractModel):
    agent: bool = Field(description="The EKS Pod Identity agent runs on every node.")
    training_role_arns: dict[str, str] = Field(description="Training namespace -> the IAM role its pods assume.")


class ClusterContract(ContractModel):
    """What the workload stacks read of the cluster stack's outputs (every one required)."""

    cluster_name: str = Field(description="The EKS cluster's name.")
    accelerator_node_groups: list[NodeGroup] = Field(description="The Trainium node groups.")
    features: dict[str, bool] = Field(description="Which cluster-software switches are on.")
    training_namespaces: list[str] = Field(description="Namespaces prepared for jobs.")
    namespace_ids: dict[str, int] = Field(
        description="Namespace -> the UID and GID its training pods run as, which own its directory of the file "
        "system (the cluster's namespaceIds).",
    )
    training_service_account: TrainingServiceAccount = Field(
        description="The service account jobs run as, and its IAM role per training namespace."
    )
    storage: Storage = Field(description="The shared file system.")
    # Named for what the workloads read of it (``volcano_queues``, by name), so the field is `queues`.
    queues: list[VolcanoQueue] = Field(
        alias="volcanoQueues", description="The Volcano queues and each one's capability."
    )
    ecr_repositories: dict[str, str] = Field(description="Image -> ECR repository URL.")
    core_node_selector: dict[str, str] = Field(
        description="The node selector of the always-on system nodes (where TensorBoard and the shell go)."
    )
    job_support_placement: JobSupportPlacement = Field(
        description="The job-support group, which scales from zero: where jobs put their CPU pods (Ray heads, MPI "
        "launchers, staging and check Jobs), and how much it holds (maxSize nodes, each leaving `allocatable` to pods)."
    )

    @property
    def node_groups(self) -> dict[str, NodeGroup]:
        return {g.name: g for g in self.accelerator_node_groups}

    def feature(self, name: str) -> bool:
        return bool(self.features.get(name, False))

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(self.training_namespaces)

    @property
    def service_account(self) -> str:
        return self.training_service_account.name

    @property
    def storage_enabled(self) -> bool:
        return self.storage.enabled

    @property
    def claims(self) -> dict[str, str]:
        return self.storage.claims

    @property
    def volcano_queues(self) -> dict[str, dict[str, str]]:
        """Each Volcano queue by name, with its capability (empty: no cap)."""
        return {q.name: q.capability for q in self.queues}

    @property
    def repositories(self) -> dict[str, str]:
        return self.ecr_repositories

    @property
    def support_placement(self) -> dict[str, Any]:
        """Where jobs' CPU pods go: nodeSelector and tolerations, as a pod spec takes them."""
        placement = self.job_support_placement
        return {"nodeSelector": dict(placement.node_selector), "tolerations": [dict(t) for t in placement.tolerations]}

    @property
    def support_max_size(self) -> int | None:
        return self.job_support_placement.max_size

    @property
    def support_allocatable(self) -> Allocatable | None:
        return self.job_support_placement.allocatable


class ClusterOutputs(ClusterContract):
    """Everything the cluster stack exports: what the workload stacks read, and the rest."""

    region: str = Field(description="The AWS region the cluster is in.")
    kubeconfig: str = Field(
        description="Secret. A kubeconfig that authenticates with `aws eks get-token` and no profile."
    )
    addon_builds: dict[str, str] = Field(
        description="EKS add-on -> the build in use (AWS's default for the Kubernetes version unless pinned)."
    )
    vpc_id: str = Field(description="The VPC, for things placed next to the nodes.")
    node_subnet_ids: list[str] = Field(description="The node (secondary-range) subnets, one per zone.")
    oidc_provider_arn: str = Field(description="The cluster's OIDC provider, for IRSA roles of workloads.")
    oidc_provider_url: str = Field(description="The OIDC issuer URL.")
    cluster_security_group_id: str = Field(description="The EKS cluster security group every node carries.")
    node_role_arn: str = Field(description="The IAM role of every node group.")
    accelerator_zone: Zone = Field(description="The zone that offers every Trainium type (and holds the file system).")
    pod_identity: PodIdentity = Field(description="Pod Identity details.")
    cloudwatch_dashboard: str | None = Field(
        description="The CloudWatch dashboard's name (NeuronCores; training restarts and failed pods), or null."
    )


def output_names(model: type[ContractModel]) -> tuple[str, ...]:
    """The stack outputs ``model`` holds, as the stack exports them."""
    return tuple(field.alias or name for name, field in model.model_fields.items())


# The outputs a workload stack reads through its StackReference.
WORKLOAD_INPUTS = output_names(ClusterContract)


def missing_outputs(outputs: Mapping[str, Any]) -> list[str]:
    return [key for key in WORKLOAD_INPUTS if outputs.get(key) is None]


def never_deployed(outputs: Mapping[str, Any]) -> bool:
    """No output at all: the cluster stack exists but no `pulumi up` has finished there yet (a
    StackReference to such a stack reads an empty output map). Some outputs but not all is a
    contract mismatch instead, never this."""
    return all(outputs.get(key) is None for key in WORKLOAD_INPUTS)


def parse_contract(outputs: Mapping[str, Any], stack: str = "the cluster stack") -> ClusterContract:
    """``outputs`` holds every one of WORKLOAD_INPUTS (check with ``missing_outputs`` first); a
    value of the wrong shape is refused naming the output and key."""
    try:
        return ClusterContract.model_validate(outputs)
    except ValidationError as exc:
        raise ConfigError(
            [f"{stack}: output {_path(err['loc'])}: {err['msg']}" for err in exc.errors()],
            source="cluster stack reference",
        ) from None


def _path(loc: tuple[Any, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


WORKLOAD_OUTPUTS: dict[str, str] = {
    "clusterStack": "The cluster stack this stack runs on.",
    "namespace": "The namespace the workloads run in.",
    "workloads": "Per enabled workload the objects it declared (jobs in order; TensorBoard's Service and, with a "
    "load balancer, its password as a secret; clusterCheck: the expected counts per node, the all-reduce floor and "
    "its source, where the results are and whether the verdict passed; runDirectories: each training run's directory "
    "on FSx, run-<hash of its model settings>, with its checkpoints and heartbeat).",
    "stepAdmissions": "Per job of a workload on a Capacity Block: a digest of what replaces it and when the update "
    "that started it ran, which the next update reads back so that its Capacity Block check counts only the jobs it "
    "starts.",
}

BOOTSTRAP_OUTPUTS: dict[str, str] = {
    "stateBucket": "The S3 bucket that holds Pulumi state.",
    "backendUrl": "`s3://<bucket>?region=<region>`: what `pulumi login` takes.",
    "secretsProviders": "Environment -> `awskms://<alias>?region=<region>`: what `pulumi stack init "
    "--secrets-provider` takes for that environment's stacks.",
    "bootstrapSecretsProvider": "`awskms://<alias>?region=<region>` of the bootstrap stack's own secrets key: what "
    "`pulumi stack init --secrets-provider` takes for the bootstrap stack (no pipeline role may use it).",
    "bootstrapSecretsKeyArn": "The KMS key behind the bootstrap stack's own secrets; every pipeline role is denied it.",
    "stateKeyArn": "The KMS key that encrypts the state bucket (not the stacks' secrets).",
    "secretsKeyArns": "Environment -> the KMS key behind its stacks' secrets; only that environment's roles use it.",
    "oidcProviderArn": "The GitHub OIDC identity provider the roles trust (created or reused).",
    "previewRoleArns": "Environment -> the role its previews assume (pull requests only where `pullRequestPreviews`; "
    "drift checks; the prod preview before approval): sees the account, reads no data but its own state and secrets.",
    "deployRoleArns": "Environment -> the role its deploy jobs assume.",
    "permissionsBoundaries": "Environment -> the managed policy its cluster stack sets as "
    "`trainium-eks:permissionsBoundary`: every role the stack creates carries it.",
    "repositoryVariables": "Variable name -> value: the GitHub Actions variables the workflows read.",
}
