"""What a model request cost, from a price table: US dollars per million input and output
tokens, by model. The table is a YAML (or JSON) mapping the chart ships as a ConfigMap and
``paddock gateway --prices FILE`` reads::

    models:
      claude-sonnet-4-5: {inputPerMTok: 3.00, outputPerMTok: 15.00}

A response's model is looked up by its name, else by the longest name in the table it starts
with (``claude-sonnet-4-5-20250929`` is priced as ``claude-sonnet-4-5``). A model the table does
not name costs nothing known: its tokens are counted, its cost is not. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from paddock.gateway.usage import Usage

PER = 1_000_000


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    input_per_mtok: float = Field(ge=0, alias="inputPerMTok")
    output_per_mtok: float = Field(ge=0, alias="outputPerMTok")


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, Price] = Field(default_factory=dict)

    def price_of(self, model: str) -> Price | None:
        if model in self.models:
            return self.models[model]
        named = [name for name in self.models if model.startswith(name)]
        return self.models[max(named, key=len)] if named else None

    def cost(self, usage: Usage) -> float | None:
        """The request's cost in US dollars; None when its model has no price here."""
        price = self.price_of(usage.model)
        if price is None:
            return None
        return (
            usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok
        ) / PER


@dataclass(frozen=True)
class Unreadable:
    reason: str


def read_prices(path: Path) -> PriceTable | Unreadable:
    try:
        return PriceTable.model_validate(yaml.safe_load(path.read_text()) or {})
    except (OSError, yaml.YAMLError, ValidationError) as exc:
        return Unreadable(f"the price table {path} cannot be read: {exc}")
