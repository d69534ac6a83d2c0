"""Hypothesis strategies: a random but valid message of any template, for a given schema version."""

from hypothesis import strategies as st

from aeron_spark.archive.codecs import MAX_KNOWN_SCHEMA_VERSION
from aeron_spark.archive.codecs.schema import MessageSpec

_INT_RANGES = {"int64": (-(1 << 63), (1 << 63) - 1), "int32": (-(1 << 31), (1 << 31) - 1)}
ascii_text = st.text(alphabet=st.characters(max_codepoint=127), max_size=80)


def encodable_versions(spec: MessageSpec) -> list[int]:
    last = MAX_KNOWN_SCHEMA_VERSION if spec.removed_in is None else spec.removed_in - 1
    return list(range(spec.since_version, last + 1))


def messages(spec: MessageSpec, version: int) -> st.SearchStrategy:
    """Messages whose every field is representable at ``version`` (absent fields at null)."""
    fixed = []
    for field in spec.fields:
        if field.since_version > version:
            fixed.append(st.just(field.absent))
            continue
        narrow = field.narrow_until is not None and version <= field.narrow_until
        low, high = (0, 255) if narrow else _INT_RANGES[field.type.name]
        values = st.integers(low, high)
        if field.enum is not None:
            values = st.one_of(st.sampled_from(list(field.enum)), values)
        fixed.append(values)
    var = [
        st.just(v.empty) if v.since_version > version
        else (ascii_text if v.is_text else st.binary(max_size=80))
        for v in spec.var_fields
    ]
    return st.builds(spec.message_type, *fixed, *var)
