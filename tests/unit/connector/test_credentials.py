"""connector/credentials.py and the credentials options: parsing, loading, and that the secret
never shows in a repr, an error or a pickled-and-printed copy."""

import dataclasses
import pickle

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict

from aeron_spark.archive.client import SecretCredentials, UnsupportedChallenge
from aeron_spark.archive.codecs.secret_challenge import CHALLENGE_PREFIX, answer_challenge
from aeron_spark.connector.credentials import ArchiveCredentials, CredentialsUnavailable, PlainCredentials
from aeron_spark.connector.options import OptionError
from aeron_spark.connector.sink.options import SinkOptions
from aeron_spark.connector.source.options import ReadMode, SourceOptions

SECRET = "Sup3r-s3cret-value"
WHERE = {"archive.controlChannel": "aeron:udp?endpoint=localhost:8010", "recordingIds": "1"}


def source(**options):
    return SourceOptions.parse(CaseInsensitiveDict({**WHERE, **options}), ReadMode.BATCH)


def sink(**options):
    return SinkOptions.parse(CaseInsensitiveDict({"archive.controlChannel": WHERE["archive.controlChannel"],
                                                  "channel": "aeron:ipc", "streamId": "7",
                                                  "sink.stagingDir": "/tmp/unused-staging", **options}),
                             streaming=False)


def test_inline_credentials_load_and_never_print_the_secret():
    options = source(**{"archive.credentials": f"spark:{SECRET}"})
    sink_options = sink(**{"ARCHIVE.CREDENTIALS": f"spark:{SECRET}"})  # Spark passes keys lower-cased
    credentials = options.connection.credentials
    loaded = credentials.load()
    assert loaded.principal == "spark" and loaded.connect_credentials() == b"spark"
    shown = [repr(options), str(options), repr(sink_options), repr(options.connection), f"{credentials}",
             repr(loaded), str(loaded), repr(dataclasses.asdict(options.connection)),
             repr(pickle.loads(pickle.dumps(options)))]
    for text in shown:
        assert SECRET not in text
    assert "<redacted>" in repr(options.connection)
    assert sink_options.connection.credentials == credentials  # the same key for the connection caches


def test_credentials_are_part_of_the_connection_key():
    first = source(**{"archive.credentials": f"spark:{SECRET}"}).connection
    again = pickle.loads(pickle.dumps(first))
    other = source(**{"archive.credentials": "spark:another"}).connection
    assert again == first and hash(again) == hash(first)
    assert other != first and source().connection != first


def test_the_challenge_is_answered_with_the_hmac_of_the_secret():
    loaded = source(**{"archive.credentials": f"spark:{SECRET}"}).connection.credentials.load()
    challenge = CHALLENGE_PREFIX + b"00112233445566778899aabbccddeeff"
    answer = loaded.on_challenge(challenge)
    assert answer == answer_challenge("spark", SECRET, challenge)
    assert SECRET.encode() not in answer
    with pytest.raises(UnsupportedChallenge, match="hmac-sha256") as error:
        loaded.on_challenge(b"kerberos:abc")
    assert SECRET not in str(error.value)


@pytest.mark.parametrize("value", ["spark", "spark:", f":{SECRET}", f"spärk:{SECRET}", ""])
def test_a_malformed_credentials_value_is_named_without_its_value(value):
    with pytest.raises(OptionError, match=r"option archive.credentials is not valid .*accepted: principal:secret") \
            as error:
        source(**{"archive.credentials": value})
    if value:
        assert value not in str(error.value)


def test_credentials_and_credentials_file_are_exclusive(tmp_path):
    with pytest.raises(OptionError, match="archive.credentials and archive.credentialsFile are exclusive") as error:
        sink(**{"archive.credentials": f"spark:{SECRET}", "archive.credentialsFile": str(tmp_path / "c")})
    assert SECRET not in str(error.value)
    with pytest.raises(OptionError, match="option archive.credentialsFile is empty"):
        source(**{"archive.credentialsFile": ""})


def test_a_credentials_file_is_read_when_connecting(tmp_path):
    file = tmp_path / "spark.credentials"
    options = source(**{"archive.credentialsFile": str(file)})  # need not exist when parsed (driver)
    with pytest.raises(CredentialsUnavailable, match=r"option archive.credentialsFile=.*: cannot read it"):
        options.connection.credentials.load()
    file.write_text(f"# the sidecar's principal\n\nspark:{SECRET}\n")
    for credentials in (options.connection.credentials, ArchiveCredentials(file=f"file://{file}"),
                        ArchiveCredentials(file=f"file:{file}")):
        loaded = credentials.load()
        assert loaded.principal == "spark"
        assert loaded.on_challenge(CHALLENGE_PREFIX + b"ab") == answer_challenge("spark", SECRET, CHALLENGE_PREFIX + b"ab")
    assert str(file) in repr(options.connection)


@pytest.mark.parametrize("content", [f"spark:{SECRET}\nother:{SECRET}\n", "", f"{SECRET}\n"])
def test_a_malformed_credentials_file_is_named_without_its_content(tmp_path, content):
    file = tmp_path / "bad.credentials"
    file.write_text(content)
    with pytest.raises(CredentialsUnavailable, match=f"option archive.credentialsFile={file}") as error:
        ArchiveCredentials(file=str(file)).load()
    assert SECRET not in str(error.value)


def test_a_refusal_names_the_archive_refusal_and_the_principal_but_not_the_secret():
    from aeron_spark.archive.client import ArchiveError
    from aeron_spark.connector.archive_connection import _rejection_message

    refused = ArchiveError("connect failed", error_code=10, archive_message="authentication rejected")
    with_credentials = source(**{"archive.credentials": f"spark:{SECRET}"}).connection
    message = _rejection_message(with_credentials, with_credentials.credentials.load(), "aeron:udp?x", refused)
    assert "AUTHENTICATION_REJECTED" in message and "'spark'" in message and SECRET not in message
    message = _rejection_message(source().connection, None, "aeron:udp?x", refused)
    assert "AUTHENTICATION_REJECTED" in message and "set archive.credentials" in message


def test_secret_credentials_check_their_parts():
    with pytest.raises(ValueError, match="empty"):
        SecretCredentials("spark", "")
    with pytest.raises(ValueError, match="principal"):
        SecretCredentials("a:b", SECRET)


def test_a_credentials_uri_is_opened_with_pyarrow_fs_and_a_failure_names_the_option():
    with pytest.raises(CredentialsUnavailable, match=r"option archive.credentialsFile=mock://secrets/spark: cannot read"):
        ArchiveCredentials(file="mock://secrets/spark").load()


def test_plain_encoding_sends_the_line_itself_and_never_prints_the_secret(tmp_path):
    """archive.credentialsEncoding=plain (a Java archive with Aeron's SimpleAuthenticator)."""
    options = source(**{"archive.credentials": f"spark:{SECRET}", "archive.credentialsEncoding": "PLAIN"})
    credentials = options.connection.credentials
    assert credentials.encoding == "plain"
    loaded = credentials.load()
    assert isinstance(loaded, PlainCredentials) and loaded.principal == "spark"
    assert loaded.connect_credentials() == f"spark:{SECRET}".encode()
    with pytest.raises(CredentialsUnavailable, match="archive.credentialsEncoding=plain answers none") as error:
        loaded.on_challenge(CHALLENGE_PREFIX + b"00")
    for text in (repr(loaded), str(loaded), repr(options), str(error.value),
                 repr(pickle.loads(pickle.dumps(options.connection)))):
        assert SECRET not in text
    again = pickle.loads(pickle.dumps(credentials))
    assert again == credentials and again.encoding == "plain"
    assert credentials != source(**{"archive.credentials": f"spark:{SECRET}"}).connection.credentials
    file = tmp_path / "credentials"
    file.write_text(f"# for the Java archive\nspark:{SECRET}\n")
    from_file = sink(**{"archive.credentialsFile": str(file), "archive.credentialsEncoding": "plain"})
    assert from_file.connection.credentials.load().connect_credentials() == f"spark:{SECRET}".encode()


def test_a_bad_or_lonely_credentials_encoding_is_an_option_error():
    with pytest.raises(OptionError, match="archive.credentialsEncoding='hmac' is not valid; accepted: challenge | plain"):
        source(**{"archive.credentials": f"spark:{SECRET}", "archive.credentialsEncoding": "hmac"})
    with pytest.raises(OptionError, match="archive.credentialsEncoding needs archive.credentials"):
        sink(**{"archive.credentialsEncoding": "plain"})
