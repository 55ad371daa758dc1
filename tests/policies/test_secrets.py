"""The secret filter and the store's screen, on a held-out-style corpus: statements that hold a
secret in many wordings (none may be stored, by any write path), harmless look-alikes that name
credentials or look like numbers and keys (all must be stored), control characters, and inputs
built to make a regex backtrack."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import pytest

from memwire import InvalidMemoryError, MemoryStore, Middleware
from memwire.middleware._capture import Capture
from memwire.policies._capture import statements
from memwire.policies._screen import control_character, refusal, screened
from memwire.policies._secrets import KINDS, find_secret

# Statements that hold a secret: the value itself (a password, a PIN, a passphrase of plain
# words, a token, a card, an id), said the many ways people say it.
SECRETS = [
    'my password for the staging box is Tr0ub4dor&3xyz',
    'the root pw is Summer2024!',
    'the wifi passphrase is correct horse battery staple',
    'the vault PIN is 4921',
    'use hunter2 as the password for the test account',
    'password: x',
    'DB_PASSWORD=pg_s3cret!',
    'Slack webhook for alerts: https://hooks.slack.com/services/T024BE7LD/B01ABCDEF12/aBcDeFgHiJkLmNoPqRsTuVwX',
    'her social security number is 219-09-9999',
    'card 4242 4242 4242 4242 exp 12/27 cvv 314',
    'the Amex on file is 3782-822463-10005',
    'the corporate Visa number is 4012888888881881',
    'CVC: 552',
    'the AWS key is AKIAIOSFODNN7EXAMPLE',
    'aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
    'GitHub PAT for the release bot: ghp_aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6',
    'gitlab runner uses glpat-Xy7Qw2Er4Ty6Ui8Op0As',
    'the Slack bot token is xoxb-2048-4096-Zx9Yw8Vu7Ts6',
    'Stripe live secret sk_live_51HqLyjWDarjtT1zdp7dcXyZ',
    'OPENAI_API_KEY=sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12',
    'Claude key: sk-ant-api03-Qw3rTy7uIoP1aSdF5gHj',
    'Twilio API key SK2b8f6c1e9d4a7b3c5e0f8a2d6c4b1e9f',
    'SendGrid: 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',
    'npm publish token npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8',
    'PyPI upload token pypi-AgEIcHlwaS5vcmcCJGE2MTk1ZTI2LTQ5OGMtNDQ0ZS1hMDgz',
    'the session cookie holds eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
    '-----BEGIN RSA PRIVATE KEY----- MIIEowIBAAKCAQEA7bq',
    'connect with postgres://app:Xk9!pq2@db.internal:5432/app',
    'the signed download link is https://files.example.com/report.pdf?sig=8f3kQ2LmZx',
    'query it with https://api.example.com/v1/items?api_key=9d8f7a6b5c4e3d2f1a0b',
    'deploy notifications go to https://discord.com/api/webhooks/123456789012345678/abcDEFghiJKLmnoPQRstuVWXyz0123456789',
    'the recovery codes for my GitHub account are 7f3a-9c2e and 1b8d-4e6f',
    'TOTP seed JBSWY3DPEHPK3PXP',
    'my 2FA backup code is 58213907',
    'the garage door code is 7734',
    'the safe combination is 12-34-56',
    'seed phrase: abandon ability able about above absent absorb abstract',
    'the admin credentials are admin / Passw0rd!',
    'Grafana service account key glsa_Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56_1a2b3c4d',
    'the license key is X7KQ2-PLM9R-44TZB-8HNWQ-3VDCE',
    "our Wi-Fi password is 'blue-otter-47'",
    'the guest wifi password is sunflower',
    "I set the router password to 'LetMeIn99'",
    'changed the jenkins password to Winter#2025',
    'passcode 862401 for the conference bridge',
    'the alarm code is 2580',
    'login for the NAS: admin, password Tr1cky$Pass',
    'the client secret is 8Q~xYz1AbCdEfGhIjKlMnOpQrStUvWxYz12345',
    'Mailgun key: key-3ax6xnjp29jd6fds4gc373sgvjxteol0',
    'refresh_token=AQAbc123def456ghi789',
    'Authorization: Basic YWRtaW46aHVudGVyMg==',
    'the HMAC signing secret is 4f9a1c2b3d4e5f60718293a4b5c6d7e8',
    'my NI number is AB 12 34 56 C',
    'passport number X12345678',
    'the IBAN is GB82 WEST 1234 5698 7654 32',
    "Sam's social security number: 123456789",
    'PIN for the debit card: 0519',
    'remember the router admin pass: r0uter!Adm',
    'my banking app passcode is 240719',
    'the OTP they texted was 660713',
    'the private key is MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQ',
    'Hugging Face token hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234567890',
    "encryption key: 'b3BlbnNzaC1rZXktdjEAAAAABG5vbmU'",
    'the kiosk unlock code is 1397',
    'my email login is ana@example.com with password kitten42',
    'the shared drive key is "Q4-budget-2025!"',
    'hunter2 is my password',
    'Summer2024! is the root pw',
    'the API key for the maps service is AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY',
    'JIRA token: ATATT3xFfGF0T4kLm9Qw2Er',
    "ssh into prod with password 'dr0wssap'",
    'telegram bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1',
    'the MySQL root password is still toor',
    "the secret is 'kj3h4-2j3h4-k23j4'",
    'card number 5555-5555-5555-4444',
    "the building's entry code: 1234#",
    'the old passphrase was purple monkey dishwasher',
    'the vault unseal key is Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5',
    "Bob's SIN number is 046 454 286",
    'the security code on the back is 907',
    'The login for the router is admin and the password is admin123',
    'wifi: HomeNet / pass: Bl4ckC0ffee',
    "Grandma's phone unlock PIN = 1 9 5 8",
    "my bank PIN number's 8842",
    'db password → qwerty123',
    "the prod DB password hasn't changed: xK9#mP2$vL",
    "Use the passphrase 'tangerine elephant marble ocean' to unlock the backup",
    'The Bitwarden master passphrase is velvet thunder harbor quiet',
    'Vault unseal keys: 3f8a9b2c1d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c',
    'the API secret for Mixpanel is 7c2d9f4e1a8b3c6d5e0f9a2b',
    'export ANTHROPIC_API_KEY=sk-ant-api03-abcDEF123ghiJKL456mnoPQR789',
    "the token for the metrics endpoint is 'mt_9f8e7d6c5b4a'",
    'His SSN is 536-22-1874',
    'visa 4000 0566 5566 5556 exp 09/28',
    'billing card: 6011 1111 1111 1117',
    'the 6-digit backup code 493027 still works',
    'my credit card number is 4111-1111-1111-1111 and the CVV is 737',
    'the Zoom meeting passcode is 8uR7xQ',
    'pwd for jenkins: j3nk1ns!',
    'ftp://deploy:S3cur3Ftp@files.example.com/upload',
    'redis://:Rz8pQ2xW@cache.internal:6379/0',
    'the signed URL https://bucket.s3.amazonaws.com/f.zip?X-Amz-Signature=abcd1234ef567890',
    "curl -H 'Authorization: Bearer 8f7e6d5c4b3a29180f7e6d5c4b3a2918' https://api.example.com",
    "the app secret = 'Zq7Xw3Vt'",
    'the key to the office safe combination is 31-07-19',
    "Ana's passport no. is 533380006",
    'the npm token is npm_4fK9sL2qR7tY1uI8oP3aS6dF0gH5jK2lZ9xC',
    "the guest network key is 'sunny-day-42'",
    'login: jdoe@corp.com password: Corp!2024',
    'the alarm disarm code is 0000',
    "Note to self: the staging Postgres password is 'Pg!Stag1ng-22'",
    'for the office printer the admin PIN is 1357',
    'My Netflix login: anna.k@gmail.com / Movies4Ever',
    'remember my bike lock combination: 4-2-7-9',
    'Jenkins API token 11a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7',
    "The SSH passphrase for id_ed25519 is 'river stone candle'",
    "We use 'Winter2025!' for all the kiosk accounts",
    'the default admin password on the router was changed to Zebra#Crossing9',
    'the wifi pw at the cabin is lakeside2019',
    'emergency access code for the server room: 8812',
    'The Google Workspace recovery codes are 8431-2290, 1177-6528, 9034-4410',
    'the Okta TOTP secret is KRSXG5CTMVRXEZLU',
    'credit card ending 4242, full number 4242424242424242, exp 04/26',
    'her SSN is 455-12-3890 and DOB 1990-02-14',
    'the DB connection string is Server=db;User Id=sa;Password=Str0ngP@ss;',
    'AWS creds: AKIAJ7QX3EXAMPLE7ABC with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE',
    'set the MYSQL_ROOT_PASSWORD env to rootpass123',
    'the voicemail PIN changed to 0091',
    'Bitwarden master password: Horse-Battery-Staple-42',
    'the Stripe test secret key: sk_test_51Hx9ZkL2mN3oP4qR5sT6uV7w',
    'signing secret for the Slack app is 8f14e45fceea167a5a36dedd4bea2543',
    'my GitLab personal access token: glpat-aB3dE6gH9jK2mN5pQ8sT',
    'the iPhone passcode is 482916',
    'my apartment buzzer code is #2219',
    "the VPN shared secret is 'c0rp-vpn-psk!'",
    'Twilio auth token: 9f8e7d6c5b4a39281706f5e4d3c2b1a0',
    'the Mongo URI is mongodb+srv://admin:Mng0Pass@cluster0.abcde.mongodb.net',
    'the API secret is ABC123xyz789QWE456',
    'keystore password=changeit',
    'ok, Winter#2025 it is for the shared laptop',
    'set the guest wifi password to marigold',
    'the DB password we agreed on: zq81kd',
]

# Harmless: they name credentials, cards or ids without giving one, or hold numbers, ids, hashes,
# versions and paths that only look like one.
HARMLESS = [
    'the password policy needs 12 characters',
    'rotate the API key monthly',
    'PIN the dependency versions in requirements.txt',
    'the token bucket refills 10 per second',
    'store the secret in Vault, never in .env',
    'the API key lives in the STRIPE_TEST_KEY secret',
    'passwords must be reset every 90 days',
    'the deploy key is managed by Terraform',
    'keyboard shortcut for search is Ctrl+K',
    'the password is in 1Password under "Staging DB"',
    'the token is refreshed hourly',
    'the key is to keep it simple',
    'the release commit is 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39',
    'request ids are UUIDs like 123e4567-e89b-12d3-a456-426614174000',
    "we're on version 3.12.1 of Python",
    'the staging database listens on port 5433',
    'the sprint ends on 2024-06-14',
    'the support line is 555-867-5309',
    'the password reset link expires after 15 minutes',
    'the primary key is (tenant_id, id)',
    'the Redis cache key is user:{id}:profile',
    'the EOS token is <|endoftext|>',
    'max_tokens is 4096 for the summarizer',
    'the context window is 128k tokens',
    'the secret to fast builds is caching',
    'the deploy token expires after 30 days',
    'passwords are hashed with argon2id',
    'the API key is stored in AWS Secrets Manager',
    'the PIN pad on the door is broken',
    'the LED is on GPIO pin 13',
    'the webhook fires on every push to main',
    'use the GitHub token from the CI secrets, not a personal one',
    'the SSH key is ed25519',
    'the private key stays on the YubiKey',
    'the password manager is Bitwarden',
    'the password must be at least 12 characters long',
    'the PIN is 4 digits',
    'the passphrase is stored in the team vault',
    'tokens are counted with tiktoken',
    'the API key is valid for 90 days',
    'secrets are mounted at /var/run/secrets',
    'the login page is /signin',
    'the key takeaway is to write tests first',
    'the Jira key for this project is MEM-42',
    'the AES key is 256 bits',
    'the credentials are in the team vault',
    'the password is required for sudo',
    'a strong password has symbols and digits',
    'the token count is logged per request',
    'the password was changed yesterday',
    'the wifi network name is CoffeeShop5G',
    'the OTP expires in 30 seconds',
    'the service listens on 10.0.3.17:8443',
    'the partition key is tenant_id',
    'the default secret name is db-credentials',
    'the session token is stored in an httpOnly cookie',
    'the access key is rotated by a Lambda every week',
    "the user's PIN must be 6 digits",
    'the passcode is sent by SMS',
    'the security code is printed on the back of the card',
    'the recovery codes are kept in the office safe',
    'the TOTP secret is enrolled via the QR code',
    'the webhook URL is configured in the repo settings',
    'the card number field accepts 16 digits',
    'a social security number has 9 digits',
    'the passport number goes in field 7',
    'PINs are never logged',
    'tokens per second peaked at 85',
    'the password is the same as last quarter',
    'the object key for the report is reports/2024/q3.csv',
    'Deploy keys are read-only by default',
    'the token endpoint is https://auth.example.com/oauth/token',
    'the secret santa budget is 20 euros',
    'press the Windows key and type cmd',
    'the musical key is C minor',
    'pin pydantic to 2.7 in the lockfile',
    'the login shell is zsh',
    'the credentials file lives at ~/.aws/credentials',
    'the bot token scope includes chat:write',
    'call the NOC at +1 415 555 0134',
    'the contract renews on 03/15/2026',
    'Node 20.11.1 is required',
    'the Docker image digest is sha256:9b2f3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809',
    'the S3 bucket is acme-prod-artifacts-eu-west-1',
    'the test class is UserAuthenticationServiceV2IntegrationTest',
    'order 1700000000000 shipped on Friday',
    'the password is correct, the username was wrong',
    'the API key header is x-api-key',
    'the key is 42 in the lookup table',
    'the primary color token is #3366FF',
    'the token is a JWT signed with RS256',
    'the secret key rotation runbook is in docs/ops/keys.md',
    'the Kubernetes secret is named api-creds',
    'the password field uses type=password',
    'ask Dana for the VPN password, it is not written down',
    'the pw reset flow sends an email',
    'the pass rate of the suite is 98%',
    'the passphrase is long and random',
    'the vault token TTL is 768h',
    'the pin header on the board has 40 pins',
    'The login for the router is on the sticker underneath',
    'wifi name: HomeNet, ask Tom for the pass',
    'the PIN reset requires a visit to the branch',
    'the password is whatever you set during onboarding',
    'password length must be between 12 and 64',
    'the token limit for gpt-4o is 128000',
    'the OpenAI key is loaded from OPENAI_API_KEY',
    'the key is stored under secret/data/payments in Vault',
    'the password hashes use bcrypt with cost 12',
    'The secret sauce is the retry logic',
    'tokens: 1,200 in, 300 out',
    'the key insight is that caching beats batching',
    'use `pytest -k test_login` to run the login tests',
    'PIN 1 on the Raspberry Pi is 3.3V',
    'the password field is called pwd in the form',
    'the API key must be sent as x-api-key',
    'the session secret comes from SESSION_SECRET',
    'keys are sorted alphabetically in the JSON output',
    'the secret scanner runs in CI',
    'the password expiry is 90 days',
    'the token is passed as a query parameter',
    'our pass rate is 97%',
    "the key is Vault's transit engine",
    'the credentials rotate every Monday at 09:00',
    'the admin password is set by the installer',
    'the one-time password arrives by email',
    'the recovery key is printed on the setup card',
    'the passphrase needs at least five words',
    'secret: true in the chart values hides the field',
    'the default password is documented in the vendor manual',
    'the PIN code must not start with 0',
    'the CVV is the 3 digit number on the back',
    'the access token is a JWT',
    'IBAN validation uses mod 97',
    'the social security number field is masked as ***-**-1234',
    'the webhook endpoint is /hooks/github',
    'the webhook URL is https://ci.example.com/hooks/build',
    'passport photos must be 35x45 mm',
    'the pin on the map is the office',
    'the token: a short-lived JWT',
    'the printer admin page is at http://10.0.0.5',
    'Anna uses Netflix on the living-room TV',
    'Jenkins builds take 12 minutes on average',
    'the SSH key for CI is stored as a GitHub secret named DEPLOY_KEY',
    'the test VM runs Ubuntu 22.04',
    'kiosk accounts are reset nightly',
    'the server room access list is kept by facilities',
    'Okta enforces TOTP for admins',
    'we accept Visa and Mastercard',
    'her birthday is 1990-02-14',
    'the DB connection string lives in appsettings.Production.json',
    'AWS creds are issued through SSO for 12 hours',
    'MYSQL_ROOT_PASSWORD is read from the compose .env file',
    'voicemail PINs must be 4 to 6 digits',
    'Bitwarden is our password manager',
    'Stripe test mode uses a separate secret key',
    "the Slack app's signing secret is verified on every request",
    'GitLab personal access tokens expire after 30 days',
    'the iPhone passcode is required after a restart',
    'the VPN shared secret is rotated every quarter',
    'Twilio auth tokens can be regenerated in the console',
    'the Mongo URI comes from MONGO_URI',
    'the API secret header is X-Api-Secret',
    'keystore password is the default one, see the docs',
    'token usage was 1.2M last month',
    'the private key file is ~/.ssh/id_rsa',
    'the API token scope is read:org',
    "the password hint is 'first pet'",
    'our passcode policy requires 6 digits',
    'items_key = "messages"',
    'mw = middleware(store, model, session_tokens=700)',
    'if key == "mode": return',
    '"proxy_key": "a project config cannot set the proxy key"',
    '_LOCK_KEY = 0x6D656D77_69726531',
    'def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:',
    'client = OpenAI(base_url=url, api_key="x")',
    'export LITELLM_MASTER_KEY="sk-$(openssl rand -hex 32)"',
    'A key is `mwk_` and 256 random bits',
    '**A master key is required.** litellm refuses to start without one',
    "Runs without an API key: litellm talks to memwire's fake provider",
    '"""hash -> occurrences so far, from keys ("<hash>#<n>")."""',
    '{"version": 1, "keys": [{"sha256": "1da6c1ff", "namespace": "alice"}]}',
    'LITELLM_MASTER_KEY=sk-... litellm --config proxy.yaml',
    'I love Python3!',
    'the release is v2.1.0-RC1!',
    'write to Ana.Smith2@corp.com about the invoice',
    'the branch is fooxoxb-deploy-notes-2024',
    'passwords are 16 characters or more',
    'the password is 12 characters minimum',
    '#Launch2024 trended all morning',
    '<b>secret plans</b> for the launch',
    'the avatar is data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk',
]


def test_the_corpus_is_large_enough() -> None:
    assert len(set(SECRETS)) == len(SECRETS) >= 60 and len(set(HARMLESS)) == len(HARMLESS) >= 60


def test_no_secret_statement_is_stored(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    stored = []
    for text in SECRETS:
        try:
            store.add(text)
        except InvalidMemoryError:
            continue
        stored.append(text)
    assert stored == []
    assert list(store) == [] and not (tmp_path / "mem" / "MEMORY.md").exists()


def test_every_look_alike_is_stored(tmp_path: Path) -> None:
    # each in a store of its own: look-alikes of one another may supersede or reinforce one another
    # (memory/_supersede.py), which is not what this test is about; relative dates get their
    # absolute one after them (policies/_dates.py), the words stay
    refused, stored = [], []
    for i, text in enumerate(HARMLESS):
        try:
            MemoryStore(tmp_path / f"m{i}").add(text)
        except InvalidMemoryError as exc:
            refused.append((text, str(exc)))
            continue
        stored += [re.sub(r" \((?:\d{4}-\d{2}(?:-\d{2})?)\)", "", m.text) for m in MemoryStore(tmp_path / f"m{i}")]
    assert refused == []
    assert stored == list(HARMLESS)


def _say_all(store: MemoryStore, texts: list[str]) -> None:
    mw = Middleware(store=store, mode="contextPerTurn", capture="auto")
    mw.capture = Capture("auto")
    for i, text in enumerate(texts):
        mw.prepare([{"role": "user", "content": f"Remember that {text}"}], session_id=f"s{i}")
    mw.flush()


def test_capture_refuses_no_look_alike(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert all(find_secret(st.said) is None for text in HARMLESS for st in statements(f"Remember that {text}"))
    with caplog.at_level(logging.WARNING, logger="memwire"):
        _say_all(MemoryStore(tmp_path / "mem"), HARMLESS)
    assert [r.getMessage() for r in caplog.records if "not captured" in r.getMessage()] == []


def test_capture_stores_no_secret(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "mem")
    _say_all(store, SECRETS)
    # nothing but a fragment the statement splitter cut before the value ("Ana's passport no.")
    assert all(find_secret(m.text) is None and len(m.text) < 20 for m in store)
    on_disk = "".join(p.read_text(errors="replace") for p in store.path.rglob("*") if p.is_file())
    assert [text for text in SECRETS if len(_value(text)) >= 6 and _value(text) in on_disk] == []


def _value(text: str) -> str:
    """The part of a statement that is the secret: its longest token with a digit or a symbol,
    else its last word."""
    tokens = [t.strip(".,;:'\"") for t in text.split()]
    marked = [t for t in tokens if re.search(r"[\d!@#$%^&*~]", t) and len(t) >= 3]
    return max(marked, key=len) if marked else tokens[-1]


@pytest.mark.parametrize("text", SECRETS)
def test_a_refusal_names_the_rule_and_never_the_value(text: str) -> None:
    kind = find_secret(text)
    assert kind in KINDS
    message = refusal(text)
    assert message is not None and kind in message and screened(text) == ("secret", kind)
    assert len(_value(text)) < 3 or _value(text) not in message
    # the message is made of fixed words only: nothing of the text but the words of its kind
    assert message == refusal("my password: Tr0ub4dor&3xyz").replace("(password)", f"({kind})")


@pytest.mark.parametrize(("text", "kind"), [
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "private key"),
    ("PuTTY-User-Key-File-3: ssh-ed25519", "private key"),
    ("AGE-SECRET-KEY-1QQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQQPZRY9X8GF2TVDW0S3JN54KHCE", "private key"),
    ("sk-ant-admin01-Zx8Yw7Vu6Ts5Rq4Po3", "Anthropic API key"),
    ("sk-svcacct-Ab12Cd34Ef56Gh78Ij90Kl", "OpenAI API key"),
    ("rk_test_4eC39HqLyjWDarjtT1zdp7dc", "Stripe key"),
    ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "Stripe key"),
    ("ASIAY34FZKBOKMUTVV7A", "AWS access key"),
    ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "Google API key"),
    ("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", "Google OAuth secret"),
    ("ya29.a0AfH6SMBx1y2z3A4B5C6D7E8F9G0", "Google OAuth secret"),
    ("DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==", "Azure key"),
    ("client secret abc1Q~defghijklmnopqrstuvwxyz0123456789", "Azure client secret"),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "GitHub token"),
    ("github_pat_11ABCDEFG0abcdefghijkl_MNOPQRSTUVWXYZ", "GitHub token"),
    ("glpat-Xy7Qw2Er4Ty6Ui8Op0As", "GitLab token"),
    ("GR1348941Xy7Qw2Er4Ty6Ui8Op0As", "GitLab token"),
    ("xoxp-2048-4096-Zx9Yw8Vu7Ts6", "Slack token"),
    ("xapp-1-A0123-4567-abcdef0123", "Slack token"),
    ("https://hooks.slack.com/workflows/T0AB12CD3/A0AB/1234/aBcDeFgH", "Slack webhook URL"),
    ("https://discordapp.com/api/webhooks/98765432101234/AbC-dEf_GhIjKlMnOpQrStUv", "Discord webhook URL"),
    ("https://acme.webhook.office.com/webhookb2/1a2b3c4d-0000-1111@5e6f/IncomingWebhook/abc", "Microsoft Teams webhook URL"),
    ("MTAxMjM0NTY3ODkwMTIzNDU2.GAbc12.Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa", "Discord bot token"),
    ("SK2b8f6c1e9d4a7b3c5e0f8a2d6c4b1e9f", "Twilio API key"),
    ("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", "SendGrid API key"),
    ("key-3ax6xnjp29jd6fds4gc373sgvjxteol0", "Mailgun API key"),
    ("0123456789abcdef0123456789abcdef-us21", "Mailchimp API key"),
    ("npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "npm token"),
    ("pypi-AgEIcHlwaS5vcmcCJGE2MTk1ZTI2LTQ5OGMtNDQ0ZS1h", "PyPI token"),
    ("hf_QwErTyUiOpAsDfGhJkLzXcVbNm1234567890", "Hugging Face token"),
    ("shpat_0123456789abcdef0123456789abcdef", "Shopify token"),
    ("bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1", "Telegram bot token"),
    ("dop_v1_" + "a1" * 32, "DigitalOcean token"),
    ("dapi0123456789abcdef0123456789abcdef", "Databricks token"),
    ("hvs.CAESIJzOx2Vb3yT6nQ1aRk8pLm4", "HashiCorp Vault token"),
    ("sq0atp-Xy7Qw2Er4Ty6Ui8Op0AsDf", "Square token"),
    ("lin_api_" + "aB3" * 13 + "x", "Linear API key"),
    ("PMAK-0123456789abcdef01234567-0123456789abcdef0123456789abcdef01", "Postman API key"),
    ("NRAK-ABCDEFGHIJKLMNOPQRSTUVWXYZ1", "New Relic key"),
    ("glsa_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF" + "_0a1b2c3d", "Grafana token"),
    ("glc_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6", "Grafana token"),
    ("sntrys_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6", "Sentry token"),
    ("dp.st.prd." + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6aB3dE6", "Doppler token"),
    ("dp.pt." + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6aB3dE6", "Doppler token"),
    ("mwk_" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa12345", "memwire proxy key"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
     "JSON web token"),
    ("Authorization: Bearer 8f7e6d5c4b3a29180f7e6d5c4b3a2918", "authorization header"),
    ("mysql://root:Xk9!pq2@localhost/app", "credentials in a URL"),
    ("https://example.com/callback#x?access_token=Zx9Yw8Vu7Ts6", "secret parameter"),
    ("4111 1111 1111 1111", "payment card number"),
    ("the number is 5105-1051-0510-5100", "payment card number"),
    ("378282246310005", "payment card number"),
    ("ssn 078-05-1120", "US social security number"),
    ("NI number: CE 12 34 56 A", "UK national insurance number"),
    ("DE89 3704 0044 0532 0130 00", "IBAN"),
    ("it was AbCdEfGh1234567890AbCdEfGh123456 all along", "random-looking key"),
    ("we log in as 'Kiosk#2025' on the shared laptops", "password-shaped word"),
    ("Server=db;Database=app;Pwd=Str0ng;", "secret parameter"),
    ("the seed is IQNP75WFC6DZPRUKSMXU6BMSSN5PTOP6", "random-looking key"),
])
def test_each_rule_names_its_kind(text: str, kind: str) -> None:
    assert find_secret(text) == kind


@pytest.mark.parametrize("text", [
    "4111 1111 1111 1112",                  # fails the Luhn check
    "411111111111116",                      # passes it, but no Visa has 15 digits
    "8080 8081 8082 8083",                  # no card issuer's range
    "000-12-3456", "666-12-3456", "912-12-3456", "123-00-4567", "123-45-0000",  # never issued
    "GB 12 34 56 A", "DE89 3704 0044 0532 0130 01",  # a prefix never used; a failed check
    "postgres://user:${PGPASSWORD}@db/app", "postgres://user:<password>@db/app",
    "https://api.example.com/items?key=YOUR_API_KEY", "https://example.com/?token={token}",
    "the build id is 7f9c2ba4e88f827d616045507605853e",  # lower-case hex
    "MyService2ProductionDeployment", "getUserByIdAndTenant2Async",
])
def test_near_misses_of_each_rule_pass(text: str) -> None:
    assert find_secret(text) is None


# ------------------------------------------------------------------ control characters

@pytest.mark.parametrize(("char", "name"), [
    ("\x00", "NUL"), ("\x07", "BEL"), ("\x08", "BS"), ("\x1b", "ESC"), ("\x7f", "DEL"),
    ("\x9b", "CSI"), ("\x9d", "OSC"), ("\x90", "DCS"), ("\x01", "C0 control"), ("\x81", "C1 control"),
])
def test_a_control_character_is_refused_naming_it(tmp_path: Path, char: str, name: str) -> None:
    store = MemoryStore(tmp_path / "mem")
    text = f"the build log shows{char}]0;owned{char} in colour"
    with pytest.raises(InvalidMemoryError) as err:
        store.add(text)
    message = str(err.value)
    assert "control character" in message and name in message and f"U+{ord(char):04X}" in message
    assert "owned" not in message and "build" not in message and char not in message
    assert list(store) == []
    with pytest.raises(InvalidMemoryError, match="control character"):
        store.add("a clean text", tags=[], topic=f"Topic{char}")  # the topic is screened too


@pytest.mark.parametrize("text", [
    "\x1b[31mred\x1b[0m",                  # a colour
    "title \x1b]0;pwned\x07",               # OSC: the terminal's title
    "link \x1b]8;;https://evil.example\x1b\\here\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "copy \x1b]52;c;ZWNobyBoaQ==\x07",       # OSC 52: the clipboard
    "line one\rline two",                   # a bare carriage return rewrites the line
])
def test_terminal_escape_sequences_are_control_characters(text: str) -> None:
    assert control_character(text) is not None
    assert screened(text) is not None and screened(text)[0] == "control character"  # type: ignore[index]


def test_tab_newline_and_crlf_are_allowed() -> None:
    assert control_character("a\tb\nc\r\nd") is None and refusal("columns:\tname\tage\r\n") is None


# ------------------------------------------------------------------ linear time

_MIB = 1 << 20
_UNITS = ["a", "1", "1 ", "a+", "_", "\"", "eyJ", "sk-", "://a:", "4111 ", "the token for the ", "password ",
          "pin ", "key: ", "use x as the ", "correct horse ", "AbCd1234", "x" * 50 + " "]


@pytest.fixture(scope="module")
def warm() -> None:
    find_secret("warm up: password is x, https://a:b@c, 4111 1111 1111 1111")


def _cpu(text: str) -> float:
    """The least CPU time of two checks of ``text`` (other processes on the machine do not count)."""
    best = float("inf")
    for _ in range(2):
        started = time.process_time()
        find_secret(text)
        best = min(best, time.process_time() - started)
    return best


@pytest.fixture(scope="module")
def prose(warm: None) -> float:
    """What checking 1 MiB of ordinary prose costs on this machine, now: the yardstick (a fixed
    number of seconds would let the machine's speed decide the tests below)."""
    return _cpu(("The staging database listens on port 5433 and the deploy script is ship.sh. " * 14_000)[:_MIB])


@pytest.mark.parametrize("unit", _UNITS)
def test_a_mebibyte_of_repeats_is_checked_in_linear_time(prose: float, unit: str) -> None:
    """Each costs 0.5x to 2x as much as prose; a regex that backtracks costs hundreds of times more
    (1 MiB of "eyJ" took 270 s before its pattern looked behind its start)."""
    best = _cpu((unit * (_MIB // len(unit) + 1))[:_MIB])
    assert best < 10 * prose, f"{best:.2f} s for 1 MiB of {unit!r}, prose {prose:.2f} s"


def test_a_mebibyte_of_distinct_credential_names_is_refused_not_slow(prose: float) -> None:
    text = "".join(f"the key {i} " for i in range(120_000))[:_MIB]
    started = time.process_time()
    kind = find_secret(text)
    assert time.process_time() - started < 10 * prose
    assert kind in KINDS  # more names than any memory holds: refused rather than left unread
