"""The base of the spec's models, and what a rule asks of any of them.

No `from __future__ import annotations` here (fmcluster.spec.models): pydantic must not
evaluate string annotations when it builds the models.
"""


from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)


def written(model: BaseModel, *path: str) -> bool:
    """Whether the spec's file gives the field at `path` under `model` (else it holds its
    default): a rule reports on a field the user wrote where one causes the problem."""
    for name in path:
        if name not in model.model_fields_set:
            return False
        model = getattr(model, name)
    return True
