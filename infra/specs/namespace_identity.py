"""Training pods that mount a claim run as their namespace's id: a ValidatingAdmissionPolicy.

Each training namespace's directory on the shared file system belongs to the namespace's own UID/GID
(`namespaceIds`), mode 2770, and root squash turns root on every client but the core nodes into
`nobody` (infra/components/storage.py). That holds only while the pods that mount the directories run
as that id: a pod in `research` running as root on a core node would be root on the file system, and one
running as `default`'s id would own `default`'s files wherever it reaches them. Pod Security cannot pin
a UID to a namespace, so this policy does, in the API server itself (no webhook to be down).

In every training namespace, a pod with a `persistentVolumeClaim` volume is admitted only when:
- its pod-level securityContext says runAsNonRoot, runAsUser and runAsGroup = the namespace's id;
- no container (init and ephemeral containers included) sets another runAsUser or runAsGroup, or
  runAsNonRoot false;
- its supplementalGroups and fsGroup are only the id and the ids of the namespaces whose directories it
  is configured to share (storage.sharedDirectories; the directories are 2770, so their group reads).

Pods without a claim (step gates, watchdogs) keep their own non-root user. Namespaces other than the
training ones (kube-system, where the directory Jobs run as root on purpose; the burn-in's) are not
matched. Ephemeral containers (`kubectl debug`) join a running pod and may mount its volumes, so they
are checked on their way in too.

One limit, said plainly: a container also gets the groups its image's /etc/group gives its user
(supplementalGroupsPolicy Merge, Kubernetes' default). That reaches nothing a pod has not mounted, and
what it mounts is its own directory and the ones it shares, whose groups it already has.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from infra.specs import admission

NAME = "training-pods-run-as-their-namespace"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"


def identities(
    namespace_ids: Mapping[str, int], shared_directories: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, Any]]:
    """Per training namespace: its id, and the groups its pods may carry (its id first, then the ids
    of the owners whose directories it shares, in name order)."""
    return {
        namespace: {
            "id": number,
            "groups": [number, *(namespace_ids[owner] for owner in sorted(shared_directories.get(namespace, {})))],
        }
        for namespace, number in sorted(namespace_ids.items())
    }


def _cel(value: Any) -> str:
    """A CEL literal for maps, lists, strings and integers (JSON's syntax is CEL's for these)."""
    return json.dumps(value)


# Containers, init containers and ephemeral containers are three types in the Pod schema: each list is
# tested on its own, never concatenated (as in infra/specs/host_access.py).
CONTAINER_LISTS = ("containers", "?initContainers.orValue([])", "?ephemeralContainers.orValue([])")


def _no_override(field: str) -> str:
    return (
        f"object.spec.{field}.all(c,"
        " c.?securityContext.?runAsUser.orValue(variables.id) == variables.id"
        " && c.?securityContext.?runAsGroup.orValue(variables.id) == variables.id"
        " && c.?securityContext.?runAsNonRoot.orValue(true))"
    )


def admission_policy(namespaces: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``namespaces``: ``identities(...)``."""
    ids = _cel({ns: i["id"] for ns, i in namespaces.items()})
    groups = _cel({ns: i["groups"] for ns, i in namespaces.items()})
    # A namespace this policy does not know (never matched: see the selector) or a pod without a claim
    # passes every rule.
    applies = "variables.mountsClaim && variables.id > 0"
    context = "object.spec.?securityContext"
    rules = [
        (
            f"{context}.?runAsNonRoot.orValue(false) == true"
            f" && {context}.?runAsUser.orValue(-1) == variables.id"
            f" && {context}.?runAsGroup.orValue(-1) == variables.id",
            "'a pod that mounts a claim in ' + request.namespace + ' runs as the namespace\\'s id: pod securityContext"
            " runAsNonRoot true, runAsUser ' + string(variables.id) + ', runAsGroup ' + string(variables.id)",
        ),
        (
            " && ".join(_no_override(field) for field in CONTAINER_LISTS),
            "'no container of a pod that mounts a claim in ' + request.namespace + ' runs as another user or"
            " group than ' + string(variables.id) + ', or with runAsNonRoot false'",
        ),
        (
            f"{context}.?supplementalGroups.orValue([]).all(g, g in variables.groups)"
            f" && {context}.?fsGroup.orValue(variables.id) in variables.groups",
            "'a pod that mounts a claim in ' + request.namespace + ' carries only the groups '"
            " + variables.groups.map(g, string(g)).join(', ') + ' (its id, and those of the directories it shares:"
            " storage.sharedDirectories)'",
        ),
    ]
    return admission.validating_policy(
        NAME,
        {
            "matchConstraints": {
                "namespaceSelector": {
                    "matchExpressions": [{"key": NAMESPACE_LABEL, "operator": "In", "values": sorted(namespaces)}]
                },
                "resourceRules": admission.POD_WRITES,
            },
            "variables": [
                {
                    "name": "mountsClaim",
                    "expression": "object.spec.?volumes.orValue([]).exists(v, has(v.persistentVolumeClaim))",
                },
                {"name": "id", "expression": f"{ids}[?request.namespace].orValue(0)"},
                {"name": "groups", "expression": f"{groups}[?request.namespace].orValue([])"},
            ],
            "validations": [
                {"expression": f"!({applies}) || ({expression})", "messageExpression": message}
                for expression, message in rules
            ],
        },
    )


def admission_policy_binding() -> dict[str, Any]:
    # The policy's own namespace selector says where it applies.
    return admission.deny_binding(NAME)
