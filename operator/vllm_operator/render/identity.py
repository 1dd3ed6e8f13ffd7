"""The fields of a pod template that name its revision, filled in after the hash.

The revision is the hash of the rendered pod template, and the template carries its
revision (label and annotation): hashing the stamped template would be circular. So the
template is rendered without them, hashed, then stamped. The resource's name is stamped the
same way (``app.kubernetes.io/instance`` and the ``deployment`` label): it never changes for
one resource, and leaving it out makes the revision a function of the spec and the operator
alone, so two resources with the same spec share revisions. ``without_identity`` undoes
``with_identity`` exactly; a test checks that every Deployment the planner creates, stripped
of these fields, hashes to the revision it is labelled with.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from vllm_operator.render import labels

IDENTITY_LABELS = (labels.INSTANCE_LABEL, labels.DEPLOYMENT_LABEL, labels.REVISION_LABEL)
IDENTITY_ANNOTATIONS = (labels.REVISION_ANNOTATION,)


def with_identity(template: Mapping[str, Any], name: str, revision: str) -> dict[str, Any]:
    """``template`` (rendered without identity) stamped with the resource and revision."""
    stamped = copy.deepcopy(dict(template))
    meta = stamped.setdefault("metadata", {})
    own = meta.get("labels", {})
    meta["labels"] = {**own, **labels.revision_labels(name, revision)}
    if labels.COMPONENT_LABEL in own:  # a multi-node group's workers keep COMPONENT_WORKER
        meta["labels"][labels.COMPONENT_LABEL] = own[labels.COMPONENT_LABEL]
    meta["annotations"] = {**meta.get("annotations", {}), labels.REVISION_ANNOTATION: revision}
    return stamped


def without_identity(template: Mapping[str, Any]) -> dict[str, Any]:
    """``template`` with the identity fields taken out (empty maps dropped)."""
    bare = copy.deepcopy(dict(template))
    meta = bare.get("metadata")
    if not isinstance(meta, dict):
        return bare
    for key, names in (("labels", IDENTITY_LABELS), ("annotations", IDENTITY_ANNOTATIONS)):
        values = meta.get(key)
        if isinstance(values, dict):
            for name in names:
                values.pop(name, None)
            if not values:
                del meta[key]
    return bare
