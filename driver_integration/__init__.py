"""The only code in aeron_spark that touches Aeron: an embedded C media driver, an Aeron C
client through cffi (publications, subscriptions, images, counters), plus log maths helpers
(``frame``, ``position``) and channel URIs (``channel_uri``)."""

from ._capi import aeron_version
from .client import AeronClient
from .counters import Counter, CounterColumns, CountersReader, CounterState
from .destinations import DestinationRequest
from .errors import AeronError, ResourceClosedError
from .image import BlockHandler, FrameHeader, Header, Image, MessageHandler
from .media_driver import MediaDriver, MediaDriverOptions
from .process_driver import DriverUnavailable
from .publication import BufferClaim, ExclusivePublication, InitialPosition, OfferResult, Publication
from .subscription import ImageCallback, Subscription

__all__ = [
    "AeronClient",
    "AeronError",
    "aeron_version",
    "BlockHandler",
    "BufferClaim",
    "Counter",
    "CounterColumns",
    "CounterState",
    "CountersReader",
    "DestinationRequest",
    "DriverUnavailable",
    "ExclusivePublication",
    "FrameHeader",
    "Header",
    "Image",
    "ImageCallback",
    "InitialPosition",
    "MediaDriver",
    "MediaDriverOptions",
    "MessageHandler",
    "OfferResult",
    "Publication",
    "ResourceClosedError",
    "Subscription",
]
