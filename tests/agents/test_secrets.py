import base64
import secrets

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from agents.secrets import SCRUBBED, SecretError, secret_decrypt, secret_encrypt, secret_pieces, secret_scrub
from tests.bounded import computes_within


def test_a_secret_is_stored_encrypted_and_read_back(settings):
    settings.SECRETS_KEY = Fernet.generate_key().decode()

    token = secret_encrypt("Bearer 令牌-123")

    assert "令牌" not in token and "Bearer" not in token
    assert secret_decrypt(token) == "Bearer 令牌-123"


def test_without_a_key_of_its_own_the_key_is_derived_from_secret_key(settings):
    settings.SECRETS_KEY = ""
    token = secret_encrypt("tok-1")

    assert secret_decrypt(token) == "tok-1"
    settings.SECRET_KEY = "a different secret key, which derives a different secrets key altogether"
    with pytest.raises(SecretError, match="cannot be decrypted") as refused:
        secret_decrypt(token)
    assert "tok-1" not in str(refused.value)


def test_a_secret_saved_under_another_key_is_a_clear_error(settings):
    settings.SECRETS_KEY = Fernet.generate_key().decode()
    token = secret_encrypt("tok-2")
    settings.SECRETS_KEY = Fernet.generate_key().decode()

    with pytest.raises(SecretError, match="ARTIFACTFLOW_SECRETS_KEY"):
        secret_decrypt(token)
    with pytest.raises(SecretError):
        secret_decrypt("not a token at all")


def test_a_key_that_is_no_fernet_key_is_a_configuration_error(settings):
    settings.SECRETS_KEY = "too-short"

    with pytest.raises(ImproperlyConfigured, match="Fernet key"):
        secret_encrypt("tok-3")


def test_the_pieces_of_a_secret_are_its_words_and_of_basic_credentials_the_decoded_password():
    basic = "Basic " + base64.b64encode("api-user:密码pa/ss+word".encode()).decode()

    assert secret_pieces("Bearer tok-8d7f6e5a") == ("Bearer tok-8d7f6e5a", "tok-8d7f6e5a", "Bearer")
    assert set(secret_pieces(basic)) >= {"api-user:密码pa/ss+word", "密码pa/ss+word", basic.split()[1]}
    # Not base64 at all: only the words.
    assert secret_pieces("Basic not-base64!!") == ("Basic not-base64!!", "not-base64!!")
    assert secret_pieces("") == ()


def test_text_without_the_secret_is_left_as_it_was():
    pieces = secret_pieces("Bearer abc/def+ghi=jkl")
    text = "热泵的效率 abc/def+gh &amp; %2F \\u002f " + base64.b64encode(secrets.token_bytes(3000)).decode()

    assert secret_scrub(text, pieces) == text


def test_a_non_ascii_secret_is_found_in_its_encoded_forms_too():
    pieces = secret_pieces("令牌-7f3a/9c2e")

    text = "%E4%BB%A4%e7%89%8c-7f3a%2F9c2e \\u4ee4\\u724c-7f3a\\/9c2e &#20196;&#x724C;-7f3a&sol;9c2e"

    assert secret_scrub(text, pieces) == f"{SCRUBBED} {SCRUBBED} {SCRUBBED}"


def test_scrubbing_a_two_megabyte_answer_is_bounded():
    pieces = secret_pieces("Bearer " + secrets.token_urlsafe(900))
    answer = (
        "A heat pump moves heat 热泵 %2F &#47; \\/ " * 50_000 + base64.b64encode(secrets.token_bytes(10**6)).decode()
    )

    with computes_within(5):
        assert secret_scrub(answer, pieces) == answer
