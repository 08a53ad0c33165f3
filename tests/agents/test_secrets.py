import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from agents.secrets import SecretError, secret_decrypt, secret_encrypt


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
