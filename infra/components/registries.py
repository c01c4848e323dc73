"""ECR repositories for the training images, scanned on push, immutable tags, pruned; and the pull-through
cache that serves the public images every node launch pulls from this registry (infra/specs/image_cache.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.components.context import ClusterContext
from infra.specs import image_cache

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
    # storage.kind: whose CSI node images the cache serves (image_cache.cached_images).
    storage_kind: str = "fsx"


class Registries(pulumi.ComponentResource):
    urls: dict[str, pulumi.Output[str]]
    pull_through_cache: list[pulumi.Resource]
    """The cache rule and its repositories: what a pod pulling ``through_cache`` references waits for."""

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
        self._ctx = ctx
        self._images = image_cache.cached_images(args.storage_kind)
        self.pull_through_cache = self._pull_through_cache(ctx, args)
        self.register_outputs({"urls": self.urls})

    def _pull_through_cache(self, ctx: ClusterContext, args: RegistriesArgs) -> list[pulumi.Resource]:
        """The rule, and the repositories of the images we route through it, declared here rather than left
        to the first pull to create: so they carry the stack's tags and scanning, and go with the stack. Immutable tags like the others: the cache tries to
        bring a cached tag in step with the upstream one at least once a day, and "turning on image tag
        immutability for repositories using a pull through cache rule will prevent Amazon ECR from updating
        images using the same tag" (ECR user guide, pull-through-cache.html), so every node runs the bytes
        the pin first fetched, whatever the upstream tag points to later."""
        child = pulumi.ResourceOptions(parent=self)
        prefix = image_cache.cache_prefix(ctx.cluster_name)
        declared: list[pulumi.Resource] = [
            aws.ecr.PullThroughCacheRule(
                "ecr-pull-through-cache",
                ecr_repository_prefix=prefix,
                upstream_registry_url=image_cache.UPSTREAM_REGISTRY,
                opts=child,
            )
        ]
        for name in dict.fromkeys(image_cache.cached_repository(ctx.cluster_name, i) for i in self._images):
            short = name.rsplit("/", 1)[-1]
            # No lifecycle policy: nothing is pushed here, and a multi-architecture image's cached children are
            # untagged images its index refers to, which an "expire untagged" rule could remove (ECR documents
            # no exemption for referenced images). Force-deleted in every environment: everything in it can
            # be pulled again.
            declared.append(
                aws.ecr.Repository(
                    f"ecr-cache-{short}",
                    name=name,
                    image_tag_mutability="IMMUTABLE",
                    image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
                    encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="AES256")],
                    force_delete=True,
                    tags=ctx.tags,
                    opts=child,
                )
            )
        return declared

    def through_cache(self, image: str) -> str:
        """A public.ecr.aws image as nodes pull it: from this registry, through the cache (same tag)."""
        if image not in self._images:
            raise ValueError(f"{image}: not in image_cache.cached_images, so no repository is declared for it")
        c = self._ctx
        return image_cache.through_cache(image, c.partition, c.region, c.account_id, c.cluster_name)
