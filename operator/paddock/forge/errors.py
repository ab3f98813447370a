"""What can go wrong in a delivery, as a person reads it."""

from __future__ import annotations


class DeliveryError(Exception):
    """The delivery did not happen; ``message`` says why (the forge's own words where it
    refused). ``refused``: the forge or the checks said no (trying again changes nothing);
    else the forge could not be reached or failed."""

    def __init__(self, message: str, refused: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.refused = refused
