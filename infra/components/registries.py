"""ECR repositories for the training images, scanned on push, immutable tags, pruned."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.components.context import ClusterContext

# Image name -> what it holds (the images in docker/).
TRAINING_IMAGES = {
    "bert-pretrain": "BERT-large pretraining with TorchX (torch-neuronx)",
    "cmd-shell": "Command shell for hands-on work on the shared file system",
    "ray-llama2": "Llama-2 pretraining with Ray Train (neuronx-distributed)",
    "nxd-llama": "Llama-2 pretraining with NxD Training on the MPI operator",
}
KEEP_TAGGED_IMAGES = 30
UNTAGGED_EXPIRY_DAYS = 7


def lifecycle_policy() -> str:
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": f"Expire untagged layers after {UNTAGGED_EXPIRY_DAYS} days",
                    "selection": {
                        "tagStatus": "untagged",
                        "countType": "sinceImagePushed",
                        "countUnit": "days",
                        "countNumber": UNTAGGED_EXPIRY_DAYS,
                    },
                    "action": {"type": "expire"},
                },
                {
                    "rulePriority": 2,
                    "description": f"Keep the newest {KEEP_TAGGED_IMAGES} images",
                    "selection": {
                        "tagStatus": "any",
                        "countType": "imageCountMoreThan",
                        "countNumber": KEEP_TAGGED_IMAGES,
                    },
                    "action": {"type": "expire"},
                },
            ]
        }
    )


@dataclass
class RegistriesArgs:
    force_delete: bool


class Registries(pulumi.ComponentResource):
    urls: dict[str, pulumi.Output[str]]

    def __init__(
        self, name: str, ctx: ClusterContext, args: RegistriesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("trainium:infra:Registries", name, None, opts)
        self.urls = {}
        for image in TRAINING_IMAGES:
            repo = aws.ecr.Repository(
                f"ecr-{image}",
                name=f"{ctx.cluster_name}/{image}",
                image_tag_mutability="IMMUTABLE",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
                encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="AES256")],
                # Dev repositories go with the stack; prod keeps images unless emptied by hand.
                force_delete=args.force_delete,
                tags=ctx.tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            aws.ecr.LifecyclePolicy(
                f"ecr-{image}-lifecycle",
                repository=repo.name,
                policy=lifecycle_policy(),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.urls[image] = repo.repository_url
        self.register_outputs({"urls": self.urls})
