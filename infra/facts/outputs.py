"""What each stack output means: the one place these descriptions live.

`make docs` renders them into docs/configuration.md, and a test fails when a stack exports a
key that has no description here (or a description outlives its output).
"""

from __future__ import annotations

CLUSTER_OUTPUTS: dict[str, str] = {
    "clusterName": "The EKS cluster's name.",
    "region": "The AWS region the cluster is in.",
    "kubeconfig": "Secret. A kubeconfig that authenticates with `aws eks get-token` and no profile.",
    "addonBuilds": "EKS add-on -> the build in use (AWS's default for the Kubernetes version unless pinned).",
    "vpcId": "The VPC, for things placed next to the nodes.",
    "nodeSubnetIds": "The node (secondary-range) subnets, one per zone.",
    "oidcProviderArn": "The cluster's OIDC provider, for IRSA roles of workloads.",
    "oidcProviderUrl": "The OIDC issuer URL.",
    "clusterSecurityGroupId": "The EKS cluster security group every node carries.",
    "nodeRoleArn": "The IAM role of every node group.",
    "acceleratorZone": "`{name, id}` of the zone that offers every Trainium type (and holds the file system).",
    "acceleratorNodeGroups": "Per group: name, instanceType, azId, azName, neuronDevices, neuronCores, "
    "efaInterfaces, labels, taints, minSize, maxSize, capacityType (`ON_DEMAND` or `CAPACITY_BLOCK`), allocatable "
    "(`{cpu, memory}` a pod can request per node after the kubelet's reservations and the DaemonSets there).",
    "features": "Which cluster-software switches are on.",
    "trainingNamespaces": "Namespaces prepared for jobs.",
    "trainingServiceAccount": "`{name, roleArns}` of the service account jobs run as: its IAM role per training namespace.",
    "storage": "The file system: enabled, fileSystemId, dnsName, mountName, storageClass, claimName, namespaces, "
    "capacityGib, deploymentType, zone, s3Links, claims (namespace -> claim).",
    "volcanoQueues": "The Volcano queues and each one's capability.",
    "etcdEndpoints": "Namespace -> `etcd-server.<ns>:2379` for TorchX rendezvous.",
    "ecrRepositories": "Image -> ECR repository URL.",
    "podIdentity": "Pod Identity details: the agent and the training role ARN per namespace.",
    "coreNodeSelector": "The node selector of the always-on system nodes (where TensorBoard and the shell go).",
    "jobSupportPlacement": "`{nodeSelector, tolerations, maxSize, allocatable}` of the job-support group, which "
    "scales from zero: where jobs put their CPU pods (Ray heads, MPI launchers, staging and check Jobs), and how "
    "much it holds (maxSize nodes, each leaving `allocatable` to pods).",
    "cloudwatchDashboard": "The CloudWatch dashboard's name (NeuronCores; training restarts and failed pods), or null.",
}

WORKLOAD_OUTPUTS: dict[str, str] = {
    "clusterStack": "The cluster stack this stack runs on.",
    "namespace": "The namespace the workloads run in.",
    "workloads": "Per enabled workload the objects it declared (jobs in order; TensorBoard's Service and, with a "
    "load balancer, its password as a secret; clusterCheck: the expected counts per node, the all-reduce floor and "
    "its source, where the results are and whether the verdict passed; runDirectories: each training run's directory "
    "on FSx, run-<hash of its model settings>, with its checkpoints and heartbeat).",
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
    "drift checks; the prod preview before approval): read-only on the account, its own state and secrets.",
    "deployRoleArns": "Environment -> the role its deploy jobs assume.",
    "repositoryVariables": "Variable name -> value: the GitHub Actions variables the workflows read.",
}
