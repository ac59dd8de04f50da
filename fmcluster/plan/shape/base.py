"""The base of the plan's records: frozen, and no field but those declared."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


# No docstring: a pydantic model's docstring would become its JSON Schema description.
class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
