"""What a model request cost, from a price table: US dollars per million input and output
tokens, by model. The table is a YAML (or JSON) mapping the chart ships as a ConfigMap and
``paddock gateway --prices FILE`` reads::

    models:
      claude-sonnet-4-5: {inputPerMTok: 3.00, outputPerMTok: 15.00}

A response's model is looked up by its name, else by the name it is a dated form of
(``claude-sonnet-4-5-20250929`` and ``gpt-5-2025-08-07`` are priced as ``claude-sonnet-4-5`` and
``gpt-5``), never by a shorter model's name it starts with (``gpt-5-pro`` is not ``gpt-5``). A
model the table does not name has no known cost: its tokens are counted, its cost is not, and
a run or day with a cost ceiling refuses it. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from paddock.gateway.usage import Usage

PER = 1_000_000
# A model's dated snapshot: its name, then the day (-20250929, -2025-08-07).
_DATED = re.compile(r"(.+)-(?:\d{8}|\d{4}-\d{2}-\d{2})")


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    input_per_mtok: float = Field(ge=0, alias="inputPerMTok")
    output_per_mtok: float = Field(ge=0, alias="outputPerMTok")


class PriceTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, Price] = Field(default_factory=dict)

    def price_of(self, model: str) -> Price | None:
        model = model.removeprefix("models/")  # (Gemini's resource name)
        if model in self.models:
            return self.models[model]
        dated = _DATED.fullmatch(model)
        return self.models.get(dated[1]) if dated else None

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
