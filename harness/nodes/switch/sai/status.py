"""SAI status codes (saistatus.h values), returned by every call instead of raising."""

from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    SUCCESS = 0
    FAILURE = -1
    NOT_SUPPORTED = -2
    NO_MEMORY = -3
    INSUFFICIENT_RESOURCES = -4
    INVALID_PARAMETER = -5
    ITEM_ALREADY_EXISTS = -6
    ITEM_NOT_FOUND = -7
    BUFFER_OVERFLOW = -8
    UNINITIALIZED = -12
    TABLE_FULL = -13
    MANDATORY_ATTRIBUTE_MISSING = -14
    NOT_IMPLEMENTED = -15
    OBJECT_IN_USE = -17
    INVALID_OBJECT_TYPE = -18
    INVALID_OBJECT_ID = -19

    @property
    def ok(self) -> bool:
        return self is Status.SUCCESS

    def __str__(self) -> str:
        return f"SAI_STATUS_{self.name}"
