"""Secrets that must never become a memory.

A memory is shown to a model on later turns, possibly in another tool, and a half-redacted
credential is still a hint: text holding a secret is refused (never redacted and stored).
``find_secret`` names the rule that matched (its *kind*: "password", "Slack webhook URL", ...),
never the value. The rules, in the order they are tried:

1. Known token formats, by their documented prefixes and shapes (the formats gitleaks and
   detect-secrets cover): private key blocks (PEM, OpenSSH, PGP, PuTTY, age); AWS, Google and Azure
   keys; GitHub, GitLab, Slack, Discord, Stripe, OpenAI, Anthropic, Twilio, SendGrid, Mailgun,
   npm, PyPI, Hugging Face and other provider tokens; Slack, Discord and Teams webhook URLs;
   JSON web tokens; ``Authorization: Bearer``/``Basic`` values; memwire's own proxy keys.
2. URLs that carry a credential: ``scheme://user:password@host``, or a secret query parameter
   (``?token=``, ``&key=``, ``sig=``, ``password=``, ``access_token=``, ...). A placeholder
   (``${PGPASSWORD}``, ``<password>``, ``YOUR_API_KEY``, ``***``) is not a credential.
3. Payment cards and national ids: a 13 to 19 digit card number (contiguous, or in the card's own
   groups with spaces or dashes) of a card issuer's range that passes the Luhn check; a US social
   security number (``ddd-dd-dddd`` in the issued ranges); a UK national insurance number; an IBAN
   that passes its mod-97 check.
4. A credential named with its value. The name is a word that names a credential (password,
   passphrase, pw, pwd, passcode, PIN, CVV, recovery/backup code, 2FA/OTP/TOTP seed, seed phrase,
   door/alarm/buzzer code, credentials, login, secret, token, key, API/access/private/... key,
   auth/access/refresh/... token, client secret, webhook, social security/passport/IBAN/...
   number), also inside an identifier (``DB_PASSWORD``). The value follows it (``is``, ``was``,
   ``are``, ``:``, ``=``, ``->``, ``'s``, ``of``, ``set to``, ``changed to``; after a few words
   of qualifier: "my password for the staging box is X", "the OTP they texted was X", "the
   password value is X", "the DB password hasn't changed: X"), or comes right after it ("PIN
   4921", "password 'dr0wssap'"), or before it ("use X as the password", "X is my password");
   after a login, "user / password" gives the password. What counts as a value depends on the
   name:

   - a password, passphrase or credentials: anything but ordinary prose: a quoted string that is
     not prose (``'swordfish'``; ``"not-needed"`` passes), a word with a digit or a symbol, a
     number (not a measure: "12 characters" is a policy), a word that is neither a function word
     nor a describing one ("the password is swordfish" is refused, "the password is required",
     "... is in 1Password", "... is stored in Vault", "credentials are admin-only" pass), or a run
     of plain words (three, two after "passphrase"/"seed phrase": "correct horse battery
     staple"). After a colon, a word that starts a sentence is no value ("without an API key:
     litellm talks to ...");
   - a PIN, passcode, CVV, one-time code or door code: a number of its length (4+ digits for a
     PIN: "the LED pin is 13" passes) or a code with letters and digits;
   - a secret, token, key or login (words with ordinary meanings: a lexer token, a primary key, a
     keyboard key, "the key is to keep it simple"): only a value that looks made for a machine:
     letters and digits mixed, symbols, or long random-looking text; never a number. An API key,
     access token or client secret after ``:``/``=`` is held to the password rule ("api_key:
     abcdef"), a quoted one from 8 characters (``api_key="x"`` in an example passes);
   - an id number: a value with digits.

   Never a value: a reference to where the secret lives (``$VAR``, ``${VAR}``, ``$(command)``,
   ``ENV_VAR_NAME``, ``os.environ[...]``, ``<placeholder>``, ``[SEP]``, a template such as
   ``<hash>#<n>``), a mask (``****``), a key's prefix shown as a placeholder (``sk-...``), a call
   or JSON structure in code, a path, a URL (rule 2 judges URLs), an email address, a version, a
   date or time, an IP address, a hex colour or number, an issue key (``ISO-8601``, ``PROJ-123``),
   a key chord (``Ctrl+K``), an algorithm or format name (``sha256``, ``argon2``, ``ed25519``,
   ``2FA``, ``base64``). A text naming credentials more often than any memory does (8,192
   distinct places) is refused rather than left partly read.
5. Long random-looking strings, without a name: 20+ characters of a key's alphabet (letters,
   digits, ``+/=_-``) whose letters and digits switch case and kind as random text does, not as
   words do (``MyService2ProductionDeployment`` and ``BetaMemoryTool20250818ViewCommand`` pass).
   Lower-case hex, and words and hex joined by ``-``/``_`` (commit ids, checksums, UUIDs, ids),
   pass; so does the data of a ``data:...;base64,`` URI.
6. Password-shaped words, without a name: upper and lower case letters, digits and one of
   ``!@#$%^&*?~`` inside the word (``Winter#2025``), or anywhere in a quoted word
   (``'Winter2025!'``); not a URL, a regex or percent-encoded text.

It is linear in the length of the text: every pattern starts at a literal or a short bounded
shape and looks behind its start rather than rescanning a run, the named-credential rule looks
at a bounded window around each name and judges a repeated context once, and the scans run over
a text once. A 1 MiB memory of repeated characters or words takes a fraction of a second.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from itertools import pairwise
from typing import NamedTuple

__all__ = ["KINDS", "SECRET_PATTERNS", "find_secret"]


# ---------------------------------------------------------------------------- 1. token formats

def _mixed(token: str) -> bool:
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


class _Format(NamedTuple):
    kind: str
    needles: tuple[str, ...]  # the pattern runs only on a text holding one (a quick ``in``)
    pattern: re.Pattern[str]  # starts with a literal where it can: the scan then skips ahead
    check: Callable[[str, re.Match[str]], bool] | None
    folded: bool  # needles and pattern are matched against the lower-cased text


def _word_start(text: str, m: re.Match[str]) -> bool:
    """The match starts a word (what ``\b`` would say, kept out of the pattern so that the scan
    can look for its literal start)."""
    return m.start() == 0 or not (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_")


def _fmt(kind: str, needles: str, pattern: str, check: Callable[[str, re.Match[str]], bool] | None = _word_start,
         folded: bool = False) -> _Format:
    return _Format(kind, tuple(needles.split()), re.compile(pattern), check, folded)


def _mixed_word(text: str, m: re.Match[str]) -> bool:
    return _word_start(text, m) and _mixed(m.group())


def _header_value(text: str, m: re.Match[str]) -> bool:
    return _word_start(text, m) and _mixed(m.group(1)) and not _is_reference(m.group(1))


SECRET_PATTERNS: tuple[_Format, ...] = (
    _fmt("private key", "-----BEGIN", r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", None),
    _fmt("private key", "PuTTY-User-Key-File-", r"PuTTY-User-Key-File-\d", None),
    _fmt("private key", "AGE-SECRET-KEY-1", r"AGE-SECRET-KEY-1[0-9A-Z]{50,}"),
    _fmt("Anthropic API key", "sk-ant-", r"sk-ant-[A-Za-z0-9_-]{16,}"),
    # a project, service-account or admin key's prefix says what it is, whatever follows; a bare
    # "sk-" needs letters and digits mixed ("sk-learn-compatible-estimators" is prose)
    _fmt("OpenAI API key", "sk-proj- sk-svcacct- sk-admin-", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
    _fmt("OpenAI API key", "sk-", r"sk-(?:None-)?[A-Za-z0-9_-]{20,}", _mixed_word),
    _fmt("Stripe key", "_live_ _test_", r"[spr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    _fmt("Stripe key", "whsec_", r"whsec_[A-Za-z0-9]{24,}"),
    _fmt("AWS access key", "A3T AKIA ASIA ABIA ACCA",
         r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    _fmt("Google API key", "AIza", r"AIza[0-9A-Za-z_-]{35}"),
    _fmt("Google OAuth secret", "GOCSPX-", r"GOCSPX-[A-Za-z0-9_-]{24,}"),
    _fmt("Google OAuth secret", "ya29.", r"ya29\.[0-9A-Za-z_-]{20,}"),
    _fmt("Azure key", "accountkey= sharedaccesskey= sharedaccesssignature=",
         r"(?:accountkey|sharedaccesskey|sharedaccesssignature)=[a-z0-9+/%]{20,}", folded=True),
    _fmt("Azure client secret", "Q~", r"Q~(?<=[A-Za-z0-9_~.]{3}\dQ~)[A-Za-z0-9_~.-]{31,34}", None),
    _fmt("GitHub token", "ghp_ gho_ ghu_ ghs_ ghr_", r"gh[pousr]_[A-Za-z0-9]{30,}"),
    _fmt("GitHub token", "github_pat_", r"github_pat_[A-Za-z0-9_]{30,}"),
    _fmt("GitLab token", "gl", r"gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|agent)-[A-Za-z0-9_-]{20,}"),
    _fmt("GitLab token", "GR1348941", r"GR1348941[A-Za-z0-9_-]{20,}"),
    _fmt("Slack token", "xox", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    _fmt("Slack token", "xapp-", r"xapp-\d-[A-Za-z0-9-]{10,}"),
    _fmt("Slack webhook URL", "hooks.slack.com/",
         r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{10,}", None),
    _fmt("Discord webhook URL", "/api/webhooks/", r"/api/webhooks/\d{5,}/[A-Za-z0-9_-]{20,}", None),
    _fmt("Microsoft Teams webhook URL", ".webhook.office.com/", r"\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/-]{20,}",
         None),
    _fmt("Discord bot token", ".", r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}", _mixed_word),
    _fmt("Twilio API key", "SK", r"SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"),
    _fmt("SendGrid API key", "SG.", r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"),
    _fmt("Mailgun API key", "key-", r"key-[0-9a-zA-Z]{32}(?![A-Za-z0-9])"),
    _fmt("Mailchimp API key", "-us",
         r"-us(?<=[0-9a-f]{32}-us)(?<![A-Za-z0-9][0-9a-f]{32}-us)\d{1,2}(?![A-Za-z0-9])", None),
    _fmt("npm token", "npm_", r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    _fmt("PyPI token", "pypi-AgE", r"pypi-AgE[A-Za-z0-9_-]{30,}"),
    _fmt("Hugging Face token", "hf_", r"hf_[A-Za-z0-9]{30,}"),
    _fmt("Shopify token", "shpat_ shpss_ shpca_ shppa_", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}(?![A-Za-z0-9])"),
    _fmt("Telegram bot token", ":AA", r":AA(?<=\d{8}:AA)[A-Za-z0-9_-]{33}", None),
    _fmt("DigitalOcean token", "_v1_", r"do[opr]_v1_[a-f0-9]{64}(?![A-Za-z0-9])"),
    _fmt("Databricks token", "dapi", r"dapi[a-f0-9]{32}(?![A-Za-z0-9])"),
    _fmt("HashiCorp Vault token", "hvs. hvb. hvr.", r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    _fmt("Square token", "sq0atp- sq0csp-", r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),
    _fmt("Linear API key", "lin_api_", r"lin_api_[A-Za-z0-9]{40}(?![A-Za-z0-9])"),
    _fmt("Postman API key", "PMAK-", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}(?![A-Za-z0-9])"),
    _fmt("New Relic key", "NRAK-", r"NRAK-[A-Z0-9]{27}(?![A-Za-z0-9])"),
    _fmt("Grafana token", "glsa_", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}(?![A-Za-z0-9])"),
    _fmt("Grafana token", "glc_", r"glc_[A-Za-z0-9+/]{32,}"),
    _fmt("Sentry token", "sntrys_ sntryu_", r"sntry[su]_[A-Za-z0-9_=+/-]{30,}"),
    _fmt("Doppler token", "dp.", r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,30}\.)?[A-Za-z0-9]{40,}"),
    _fmt("memwire proxy key", "mwk_", r"mwk_[A-Za-z0-9_-]{32,}"),
    _fmt("JSON web token", "eyJ",
         r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}"),
    _fmt("authorization header", "bearer basic", r"(?:bearer|basic)[ \t]+([a-z0-9._~+/-]{16,256}=*)", _header_value,
         folded=True),
)


# ---------------------------------------------------------------------------- value shapes

_SECRET_SYMBOLS = frozenset("!@#$%^&*+=~?|<>;:/")
_PLACEHOLDER = re.compile(
    r"""\$\{[^{}]+\}|\$[A-Z_][A-Z0-9_]*|%[A-Za-z_][A-Za-z0-9_]*%|\{\{.*\}\}|\{%.*%\}|<[^<>]*>|\[[^\[\]]*\]|\{[^{}]*\}
      |[*xX•·#.…_-]{3,}|(?i:your|my|the|some|example)(?:[_-][a-z]+)+|(?i:redacted|hidden|masked|elided|omitted)
      |[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[a-z]+(?:_[a-z]+)+(?:\(\))?""", re.VERBOSE)
_REFERENCE = re.compile(r"\$\(|environ|getenv|process\.env|\benv\.|\bENV\[|secrets\.|vault:|op://|ssm:|keyring"
                        r"|secretsmanager|"
                        r"\bsettings\.|\bconfig\.|\bos\.|\bself\.", re.IGNORECASE)
_HARMLESS_SHAPE = re.compile(
    r"""v?\d+(?:\.\d+){1,3}(?:[-+.]?[A-Za-z0-9]+)?       # a version
      |\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?   # a date
      |\d{1,2}(?::\d{2}){1,2}(?:[ap]m)?                    # a time
      |\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?:/\d+)?           # an IP address
      |\#(?=[0-9]*[A-Fa-f])[0-9A-Fa-f]{3,8}                # a colour
      |0x[0-9A-Fa-f_]+                                     # a number in hex
      |[A-Z][A-Z0-9]{1,9}-\d+                              # an issue key, ISO-8601
      |(?:(?i:ctrl|cmd|command|alt|option|opt|shift|meta|super|win|fn)[+-]){1,3}  # a key chord
        (?i:[a-z0-9]|f\d{1,2}|enter|return|tab|space|esc|escape|del|delete|backspace|up|down|left|right|home|end)
      |[^\s@]+@[^\s@]+\.[A-Za-z]{2,}                      # an email address
      |(?:~|\.{1,2})?/[^\s]*|[A-Za-z]:\\.*                 # a path
      |[a-z][a-z0-9+.-]*://.*                              # a URL (rule 2 judges those)
      |\d+(?:[.,]\d+)?(?:%|[kKmMgGtT][bB]?|ms|s|h|d|x)     # a measure
      |[a-z0-9-]+\.(?:com|org|net|io|dev|app|co|ai|sh|env|json|ya?ml|toml|txt|pem|key|pub|cfg|conf|ini|md)
    """, re.VERBOSE)
# algorithm and format names, units with digits: not a password
_TECH = re.compile(
    r"""(?:2fa|mfa|u2f|otp|totp|hotp|k8s|i18n|l10n|a11y|s3|ec2|h[23]|gpt-?\d(?:\.\d+)?[a-z]?(?:-[a-z]+){0,3}|py3\d{0,2}
      |ipv[46]|wpa[23]?|x509|x25519|p-?(?:256|384|521)|(?:hs|rs|es|ps)(?:256|384|512)|v\d+(?:\.\d+)*
      |(?:sha|md|aes|rsa|ed|pkcs|argon|pbkdf|base|utf|tls|ssl|oauth|crc|blake|chacha|poly|fido|ecdsa|dsa|http|ucs|latin
        |iso|cp|ascii|int|uint|float|secp|curve|bcrypt|scrypt)-?\d{1,5}(?:\.\d+)?(?:id|ts|gcm|cbc|k1|r1|[a-z])?
      |\d+-?(?:bit|bits|byte|bytes|char|chars|character|characters|digit|digits|letter|letters|word|words|day|days|hour|hours
        |minute|minutes|second|seconds|week|weeks|month|months|year|years)
      |\d+(?:st|nd|rd|th))""", re.VERBOSE | re.IGNORECASE)
_UNIT = re.compile(
    r"""[ \t]*(?:[-+]|to[ \t]|or[ \t]|and[ \t])?[ \t]*(?:\d+[ \t]*)?(?:characters?|chars?|letters?|digits?|numbers?
      |symbols?|words?|bytes?|bits?
      |long|minimum|maximum|min|max|at[ \t]+least|or[ \t]+more|or[ \t]+fewer|or[ \t]+less|seconds?|secs?|minutes?
        |mins?|hours?|hrs?
      |days?|weeks?|months?|years?|times|attempts?|tries|retries|per|each|every|%|percent|people|users?|accounts?
        |items?|entries
      |keys|tokens|passwords|codes|requests?|calls?|ms|[smhd]|k|kb|mb|gb)(?![A-Za-z0-9])""", re.VERBOSE | re.IGNORECASE)
_NUMBER = re.compile(r"\+?\d[\d \t.,/-]{0,40}")
_QUOTES = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "«": "»", "„": "“"}

_STOP = frozenset(["a", "an", "the", "in", "on", "at", "by", "to", "of", "for", "from", "with", "without", "into",
                   "onto", "inside", "under", "behind", "via", "per", "and", "or", "but", "nor", "not", "no", "never",
                   "always", "only", "just", "also", "still", "now", "then", "than", "so", "too", "very", "really",
                   "quite", "rather", "pretty", "already", "usually", "often", "sometimes", "mostly", "either",
                   "neither", "both", "each", "every", "all", "any", "some", "none", "nothing", "something", "anything",
                   "everything", "what", "whatever", "which", "whichever", "who", "whoever", "whom", "whose", "that",
                   "this", "these", "those", "it", "its", "it's", "they", "them", "their", "theirs", "there", "here",
                   "where", "wherever", "when", "how", "why", "my", "mine", "your", "yours", "our", "ours", "his",
                   "her", "hers", "we", "you", "i", "me", "us", "he", "she", "one", "ones", "same", "such", "other",
                   "another", "as", "like", "unlike", "about", "around", "over", "between", "before", "after", "during",
                   "until", "since", "because", "if", "unless", "whether", "though", "although", "while", "be", "been",
                   "being", "is", "are", "was", "were", "do", "does", "did", "done", "have", "has", "had", "can",
                   "could", "will", "would", "should", "must", "may", "might", "shall", "see", "check", "ask", "use",
                   "get", "got", "set", "kept", "put", "left", "given", "sent", "shown", "known", "held", "saved",
                   "found", "lost", "made", "written", "hidden", "stolen", "leaked", "taken", "gone", "read", "reset",
                   "needs", "need", "n/a", "na", "tbd", "todo", "unknown", "unset", "empty", "blank", "missing", "null",
                   "nil", "none", "true", "false", "yes", "str", "string", "int", "integer", "bool", "boolean", "bytes",
                   "object", "optional", "any", "secretstr", "number", "text", "value", "values", "varchar", "char",
                   "field", "enum", "list", "dict", "array", "json", "type", "types", "len", "length", "size", "more",
                   "less", "most", "least", "much", "many", "few", "several", "enough", "plenty", "else", "otherwise"])
_DESCRIBING = frozenset(["required", "mandatory", "expired", "wrong", "right", "correct", "incorrect", "invalid",
                         "valid", "weak", "strong", "long", "short", "secure", "insecure", "safe", "unsafe",
                         "different", "new", "old", "default", "temporary", "permanent", "unique", "random", "simple",
                         "complex", "hard", "easy", "fine", "ok", "okay", "good", "bad", "great", "compromised",
                         "visible", "encrypted", "hashed", "salted", "rotated", "changed", "locked", "unlocked",
                         "disabled", "enabled", "active", "inactive", "public", "private", "secret", "confidential",
                         "sensitive", "personal", "elsewhere", "somewhere", "everywhere", "nowhere", "separate",
                         "identical", "similar", "unchanged", "outdated", "current", "latest", "deprecated", "obsolete",
                         "stale", "fresh", "ephemeral", "static", "dynamic", "global", "local", "shared", "common",
                         "standard", "generic", "special", "specific", "overdue", "due", "lowercase", "uppercase",
                         "numeric", "alphanumeric", "case", "insensitive", "revoked", "available", "unavailable",
                         "absent", "present", "gone", "out", "off", "up", "down", "outside", "offline", "online",
                         "important", "critical", "crucial", "key", "essential", "paramount", "necessary",
                         "unnecessary", "useless", "fake", "real", "dummy", "placeholder", "example", "sample", "test",
                         "demo", "protected", "restricted", "limited", "unlimited", "scoped", "minimal", "maximal",
                         "broad", "narrow", "tied", "bound", "linked", "attached", "readonly", "same", "weird",
                         "tricky", "annoying", "obvious", "memorable", "guessable", "unguessable", "trivial",
                         "difficult", "lost", "forgotten", "mine", "unused", "used", "new", "per", "there", "here",
                         "ours", "yours", "theirs", "his", "hers", "whose", "own", "wide"])
_DESCRIBING_END = re.compile(r"(?:ed|ing|ly|able|ible|ive|ous|ful|less|ness|ment|tion|sion|ity|ance|ence|ical|ism|ward"
                             r"|wards|wise)$")
_PARTICIPLE = re.compile(r"(?:ed|en)$|^(?:kept|set|held|known|shown|written|hidden|given|taken|sent|stolen|leaked|lost"
                         r"|found|made"
                         r"|done|gone|shared|read|put|left|bound|tied)$")
_WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")
_WORDS = re.compile(r"[A-Za-z]+(?:[ \t]+[A-Za-z]+){0,7}")


def _is_reference(v: str) -> bool:
    """A name of where a secret lives, a placeholder or a mask: not the secret."""
    return bool(_PLACEHOLDER.fullmatch(v) or _REFERENCE.search(v)
                or (("<" in v or "{" in v) and not any(c.isalnum() for c in _TEMPLATE_PART.sub("", v))))


_TEMPLATE_PART = re.compile(r"<[^<>]*>|\{[^{}]*\}")  # "<hash>#<n>", "{user}:{id}": a template, not a value


def _is_tech(v: str) -> bool:
    """An algorithm or format name, a unit with digits, or words of those joined by ``-``/``/``."""
    if _TECH.fullmatch(v):
        return True
    parts = [p for p in re.split(r"[-/]", v) if p]
    return (any(_TECH.fullmatch(p) for p in parts)
            and all(_TECH.fullmatch(p) or (p.isalpha() and _ordinary(p.lower())) for p in parts))


def _ordinary(word: str) -> bool:
    """A function word or a describing one: prose, not a password."""
    return word in _STOP or word in _DESCRIBING or bool(_DESCRIBING_END.search(word))


def _prose(word: str) -> bool:
    """A word of ordinary prose: every part ordinary, or a compound that ends in a describing
    word ("admin-only", "company-wide")."""
    parts = re.split(r"['’-]", word.lower())
    return all(_ordinary(p) for p in parts) or ("-" in word and _ordinary(parts[-1]))


# ---------------------------------------------------------------------------- 4. named credentials

class _Name(NamedTuple):
    label: str      # the kind reported
    rule: str       # how a value is judged: password, passphrase, code, loose, api, id, webhook
    digits: int = 1  # a number of at least this many digits is a value


_NAMES: dict[str, tuple[_Name, str]] = {
    "passphrase": (_Name("passphrase", "passphrase"), r"pass[ _-]?phrases?"),
    "seedphrase": (_Name("seed phrase", "passphrase"),
                   r"(?:seed|recovery|mnemonic|wallet|backup)[ _-]?(?:phrases?|words?)|mnemonics?"),
    "password": (_Name("password", "password"),
                 r"pass(?:word|wd|wrd)s?|pass[ _-]words?|pw|pwd|pwds|pword|pswd|passwort|contrase[nñ]a"
                 r"|mot[ _-]de[ _-]passe"),
    "pass": (_Name("password", "password-strong"), r"pass"),
    "passcode": (_Name("passcode", "code", 4), r"pass[ _-]?codes?|unlock[ _-]codes?"),
    "pin": (_Name("PIN", "code", 4), r"pin(?:[ _-]?(?:codes?|numbers?)|s)?"),
    "cvv": (_Name("card security code", "code", 3),
            r"cvv2?|cvc2?|cvn|csc|(?:card[ _-])?security[ _-]codes?|card[ _-]verification[ _-](?:codes?|values?)"),
    "otp": (_Name("one-time code", "code", 4),
            (r"(?:2fa|mfa|otp|totp|hotp|sms|verification|auth|authenticator|login|one[ _-]time|two[ _-]factor)"
             r"[ _-]?codes?|one[ _-]time[ _-]passwords?|otps?|totps?")),
    "recovery": (_Name("recovery code", "password"),
                 r"(?:recovery|backup|bypass|scratch|emergency|rescue)[ _-]?(?:codes?|keys?)"),
    "seed": (_Name("2FA seed", "password"),
             r"(?:2fa|mfa|otp|totp|hotp|authenticator|two[ _-]factor)[ _-]?(?:seeds?|secrets?|keys?)"),
    "door": (_Name("access code", "code", 3),
             (r"(?:(?:door|gate|alarm|garage|entry|building|keypad|lockbox|safe|locker|padlock|lock|buzzer|intercom)"
              r"(?:[ _-]?(?:disarm|arming|entry|access|unlock))?|access|disarm|arming)[ _-]?(?:codes?|combinations?"
              r"|combos?)")),
    "credentials": (_Name("credentials", "password"), r"credentials?|creds|logins?[ _-](?:details|info)"),
    "login": (_Name("login", "loose"), r"logins?"),
    "privatekey": (_Name("private key", "api"), r"private[ _-]?keys?"),
    "apikey": (_Name("API key", "api"), r"api[ _-]?keys?|apikeys?|x-api-key"),
    "accesskey": (_Name("access key", "api"), r"(?:secret[ _-]?)?access[ _-]?keys?(?:[ _-]?ids?)?|secret[ _-]?keys?"),
    "otherkey": (_Name("key", "api"),
                 (r"(?:license|licence|product|activation|registration|serial|ssh|deploy|signing|encryption|decryption"
                  r"|master"
                 r"|wifi|wi-fi|wpa2?|wep|network|app|application|client|service|subscription|storage|sas|bot|consumer|auth"
                 r"|session|admin|root|gpg|pgp|jwt|hmac|aes|crypto|wallet|webhook|shared|sendgrid|stripe|openai|anthropic"
                 r"|aws|gcp|azure|twilio|mailgun|github|slack)[ _-]?keys?")),
    "token": (_Name("token", "api"),
              (r"(?:access|auth|bearer|refresh|session|api|personal[ _-]access|bot|oauth|id|jwt|csrf|xsrf|github"
               r"|gitlab|slack"
              r"|discord|npm|pypi|registry|deploy|service|app|security|sso|hf|huggingface|telegram|vault|runner|ci|pat|sas"
              r"|machine)[ _-]?tokens?")),
    "clientsecret": (_Name("client secret", "api"),
                     (r"(?:client|app|application|consumer|webhook|signing|shared|api|oauth|jwt|session|hmac|aws|cookie)"
                     r"[ _-]?secrets?")),
    "webhook": (_Name("webhook URL", "webhook"), r"webhooks?(?:[ _-]?(?:urls?|endpoints?|links?|addresse?s?))?"),
    "secret": (_Name("secret", "loose"), r"secrets?"),
    "bare_token": (_Name("token", "loose"), r"tokens?"),
    "bare_key": (_Name("key", "loose"), r"keys?"),
    "id": (_Name("id number", "id", 4),
           (r"ssns?|social[ _-]security(?:[ _-](?:numbers?|nos?\.?|#))?|(?:social"
            r"|national)[ _-]insurance(?:[ _-](?:numbers?|nos?\.?))?"
           r"|ni[ _-](?:numbers?|nos?\.?)|ninos?\.?|national[ _-]id(?:entity|entification)?(?:[ _-](?:numbers?|nos?\.?"
           r"|cards?))?"
           r"|passport(?:[ _-](?:numbers?|nos?\.?|#))?|driver'?s?[ _-]licen[cs]e(?:[ _-](?:numbers?|nos?\.?))?"
           r"|tax[ _-]?(?:id|identification)(?:[ _-](?:numbers?|nos?\.?))?|sin[ _-]numbers?|aadhaar(?:[ _-](?:numbers?"
           r"|nos?\.?))?"
           r"|ibans?|(?:bank[ _-])?account[ _-](?:numbers?|nos?\.?)|routing[ _-]numbers?|sort[ _-]codes?|(?:credit"
           r"|debit)[ _-]cards?"
           r"|card[ _-](?:numbers?|nos?\.?)|personnummer|bsn|steuer-?id|medicare[ _-](?:numbers?|nos?\.?)"
           r"|nhs[ _-](?:numbers?|nos?\.?)")),
}
# the names that start with another one's word first ("TOTP secret" before "TOTP", "secret key"
# before "secret"), the bare words last
_ORDER = ("passphrase", "seedphrase", "seed", "otp", "recovery", "cvv", "door", "passcode", "pin", "id", "credentials",
          "privatekey", "apikey", "accesskey", "otherkey", "token", "clientsecret", "webhook", "password", "pass",
          "login", "secret", "bare_token", "bare_key")
_GROUP = {g: re.compile(_NAMES[g][1]) for g in _ORDER}


def _top_level(pattern: str) -> list[str]:
    """The alternatives of ``pattern`` at its top level."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 1
        elif c == "[":
            i = pattern.index("]", i + 2)
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*parts, pattern[start:]]


def _literal_first(alt: str) -> list[str]:
    """``alt`` as alternatives that each start with a literal character: "(?:a|b)c" -> "ac", "bc"."""
    if not alt.startswith("(?:"):
        assert alt[0].isalnum() and alt[1:2] not in ("?", "*", "+", "{"), alt
        return [alt]
    depth = 0
    for j, c in enumerate(alt):
        depth += (c == "(") - (c == ")")
        if depth == 0:  # the group closes at j
            inner, rest = alt[3:j], alt[j + 1:]
            break
    else:
        raise AssertionError(f"unbalanced group: {alt}")
    if rest.startswith("?"):  # an optional group first: with it, and without it
        return [y for x in _top_level(inner) for y in _literal_first(x + rest[1:])] + _literal_first(rest[1:])
    return [y for x in _top_level(inner) for y in _literal_first(x + rest)]


def _noun_pattern() -> re.Pattern[str]:
    """Every name, for a scan of the lower-cased text that looks only where a name's first letter
    is (the regex engine skips to those letters): each alternative starts with its literal letter,
    and the letter must start a word."""
    by_first: dict[str, list[str]] = {}
    for g in _ORDER:
        for alt in (y for x in _top_level(_NAMES[g][1]) for y in _literal_first(x)):
            by_first.setdefault(alt[0], []).append(alt[1:])
    return re.compile("(?:" + "|".join(f"{c}(?<![a-z0-9]{c})(?:{'|'.join(rests)})" for c, rests in by_first.items())
                      + ")(?![a-z0-9])")


_NOUN = _noun_pattern()
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _folded(text: str) -> str:
    """``text`` in lower case, each character where it was (ASCII only when lower() would move them)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


# a name used for something else: "primary key", "EOS token", "the LED pin", "top secret"
_OTHER_MEANING = {
    "bare_key": frozenset(["primary", "foreign", "composite", "compound", "unique", "sort", "sorting", "partition",
                           "partitioning", "cluster", "clustering", "shard", "sharding", "hash", "cache", "caching",
                           "lookup", "dict", "dictionary", "map", "json", "yaml", "toml", "config", "configuration",
                           "registry", "row", "natural", "surrogate", "routing", "idempotency", "object", "s3",
                           "bucket", "redis", "index", "join", "group", "grouping", "music", "musical", "piano",
                           "keyboard", "shortcut", "hot", "escape", "esc", "enter", "return", "tab", "arrow",
                           "function", "fn", "modifier", "meta", "option", "alt", "ctrl", "control", "shift", "space",
                           "delete", "backspace", "translation", "i18n", "locale", "message", "react", "list", "table",
                           "column", "field", "property", "dedup", "dedupe", "deduplication", "memo", "public", "minor",
                           "major", "sign", "rate", "throttle", "cursor", "pagination", "page", "continuation",
                           "resume", "sequence", "record", "document", "entity", "item", "attribute", "setting",
                           "settings", "legend", "answer", "dynamodb", "range", "query", "cluster_key", "composite"]),
    "bare_token": frozenset(["eos", "bos", "pad", "padding", "sep", "separator", "cls", "mask", "unk", "unknown",
                             "stop", "end", "start", "special", "lexer", "parser", "next", "first", "last", "previous",
                             "prev", "input", "output", "prompt", "completion", "max", "context", "bucket",
                             "cancellation", "continuation", "pagination", "page", "cursor", "sync", "design", "color",
                             "colour", "reasoning", "thinking", "cached", "image", "audio", "text", "word", "subword",
                             "bpe", "vocab", "vocabulary", "sentinel", "delimiter", "boundary", "placeholder", "fill",
                             "newline", "eot", "eom", "system", "chat", "template", "control", "lex", "syntax", "ast",
                             "parse", "css", "utility", "theme", "spacing", "size", "font", "the_token"]),
    "secret": frozenset(["top", "trade", "open", "dirty", "little", "big", "family", "best-kept", "kubernetes", "k8s",
                         "sealed"]),
    "pin": frozenset(["gpio", "led", "data", "clock", "reset", "power", "ground", "gnd", "vcc", "output", "input",
                      "analog", "digital", "pwm", "interrupt", "tx", "rx", "sda", "scl", "chip", "enable", "version",
                      "versions", "dependency", "dependencies", "map", "drop", "hair", "bowling", "safety", "header",
                      "signal", "control", "cs", "ss", "mosi", "miso", "sck", "io", "boot", "strap", "jumper", "bobby",
                      "lapel", "push", "cotter"]),
    "login": frozenset(["sso", "social", "google", "github", "oauth"]),
}
_SET_VERB = re.compile(r"\b(?:set|sets|setting|change|changed|changing|reset|update|updated|rotate|rotated|chose"
                       r"|choose)\b", re.IGNORECASE)
_CONNECTOR = re.compile(r"""[ \t]*(?:
      ["'`]?[ \t]*(?P<strong>:=|=>|->|=(?!=)|[→⇒—–])
    | ["'`]?[ \t]*(?P<colon>:(?!//))
    | (?P<poss>['’]s(?![A-Za-z0-9]))
    | (?P<is>(?:(?:is|was|are|were|will[ \t]+be|would[ \t]+be|should[ \t]+be|must[ \t]+be|shall[ \t]+be|has[ \t]+been
              |have[ \t]+been|had[ \t]+been|becomes|became|equals|reads|remains|stays)(?![A-Za-z0-9])
              (?:[ \t]+(?:now|still|currently|just|simply|literally|actually|again|always|also))?
              (?:[ \t]+(?:set|changed|reset|updated|rotated)[ \t]+to(?![A-Za-z0-9]))?[ \t]*:?
           | (?:(?:got|gets|was|is|has[ \t]+been)[ \t]+)?(?:set|changed|reset|updated|rotated)[ \t]+to(?![A-Za-z0-9])))
    | (?P<weak>(?:to|of)(?![A-Za-z0-9]))
)""", re.VERBOSE | re.IGNORECASE)
_QUALIFIED = re.compile(r"""[ \t]+(?:for|to|of|on|at|in|from|with|into|inside|under|used[ \t]+for)
    (?:[ \t]+[^\s,;:=!?"'`.()]{1,40}(?:\.[^\s,;:=!?"'`.()]{1,40}){0,3}){1,5}?
    (?=[ \t]*(?::(?!//)|=|(?:is|was|are|were)(?![A-Za-z0-9])))""", re.VERBOSE | re.IGNORECASE)
# "the OTP they texted was X", "the password that IT gave me is X"
_RELATIVE = re.compile(r"""[ \t]+(?:(?:that|which)[ \t]+)?(?:i|you|we|they|he|she|someone|somebody|it
      |ops)(?:[ \t]+[A-Za-z']{1,20}){1,3}?
    (?=[ \t]*(?:is|was|are|were)(?![A-Za-z0-9]))""", re.VERBOSE | re.IGNORECASE)
_FILLER = re.compile(r"[ \t]+(?:env(?:ironment)?(?:[ \t]+var(?:iable)?)?|var(?:iable)?|value|string|entry)"
                     r"(?![A-Za-z0-9])", re.IGNORECASE)
_PAIR = re.compile(r"([ \t]*/[ \t]*)\S")  # a user name, then "/" and the password
_NEAR_ASSIGN = re.compile(r"(?:[ \t]+[A-Za-z'’]{1,20}){1,4}?[ \t]*(?::(?!//)|=)")
_DIRECT = re.compile(r"[ \t]+(?=[^\s])")
_CLAUSE_END = re.compile(r"[ \t]*(?:\Z|[\n.,;:!?)\]]|(?:for|on|at|in|to|from|with|when|if|and|but"
                         r"|so)(?![A-Za-z0-9]))", re.IGNORECASE)
_USE_VERBS = frozenset(["use", "using", "used", "enter", "entered", "type", "typed", "try", "tried", "chose", "choose",
                        "picked", "pick", "set"])
_WINDOW = 240
_TOKEN = re.compile(r"\S{1,120}")


class _Value(NamedTuple):
    core: str       # the value's first token, without surrounding punctuation
    quoted: bool
    rest: str       # what follows the token on its line
    words: list[str]  # the plain words the value starts with
    digits: int = 0   # the digits of the number the value starts with ("046 454 286": 9)


_CODE_CALL = re.compile(r"[A-Za-z_][\w.]*\(")
# "sk-...", "ghp_…": a key's prefix, shown as a placeholder
_SHOWN_PREFIX = re.compile(r"[A-Za-z0-9_-]{1,12}(?:\.\.\.|…)")
_VALUE_END = re.compile(r"[\"`,;\[\]{}()<]")
_EDGES = ".,;:!?)]}\"'`”’»…*_~"


def _value_at(w: str, i: int) -> _Value | None:
    """The value that starts at ``w[i]`` (after blanks), on the same line."""
    while i < len(w) and w[i] in " \t":
        i += 1
    if i < len(w) and w[i] == "(" and not _PLACEHOLDER.match(w, i):  # "(see 1Password)", "(`/key/new`)"
        i += 1
    if i >= len(w) or w[i] in "\n[{":  # nothing on the line, or JSON's structure: no value here
        return None
    if w[i] in "fbrFBR" and w[i + 1:i + 2] in ("'", '"'):  # a Python string prefix: f"sk-{ns}"
        i += 1
    close = _QUOTES.get(w[i])
    if close is not None:
        end = w.find(close, i + 1, i + 101)
        if end > i + 1 and "\n" not in w[i + 1:end]:
            return _Value(w[i + 1:end], True, w[end + 1:], [])
    token = _TOKEN.match(w, i).group()  # type: ignore[union-attr]
    end = i + len(token)
    bare = token.rstrip(".,;:!?")
    if (_PLACEHOLDER.fullmatch(bare) or _SHOWN_PREFIX.fullmatch(token) or _CODE_CALL.match(token)
            or _REFERENCE.search(token)):
        return _Value("", False, w[end:], [])  # a placeholder, a shown prefix, a call in code: no value
    cut = _VALUE_END.search(token, 1)
    if cut is not None and token[0] not in "([{<":  # JSON or code punctuation ends a bare value
        token, end = token[:cut.start()], i + cut.start()
    core = token.strip(_EDGES).lstrip("([{*_~")
    words = _WORDS.match(w, i)
    number = _NUMBER.match(w, i)
    return _Value(core, False, w[end:], words.group().split() if words else [],
                  sum(c.isdigit() for c in number.group()) if number else 0)


def _number_value(v: _Value, digits: int) -> bool:
    """A number of ``digits`` or more digits that is not a measure ("12 characters", "90 days")."""
    n = _NUMBER.fullmatch(v.core)
    if n is None:
        return False
    if max(v.digits, sum(c.isdigit() for c in v.core)) < digits:
        return False
    return not _UNIT.match(v.rest)


def _looks_made(v: str) -> bool:
    """A value made for a machine: letters and digits mixed, symbols, or long."""
    if len(v) < 6:
        return False
    letters, digits = sum(c.isalpha() for c in v), sum(c.isdigit() for c in v)
    symbols = sum(c in _SECRET_SYMBOLS for c in v)
    return (bool(letters and digits) or bool(symbols and (letters or digits)) or (len(v) >= 16 and v.isalnum())
            or _random(v))


# complexity over 15: one test per shape a secret value takes, cheapest first: split, one decision would be scattered
def _secret_value(v: _Value, name: _Name, strength: str) -> bool:  # noqa: C901
    """Whether ``v``, said as the value of ``name`` (with ``strength``: "strong" after ``=``,
    "colon" after ``:``, "is" after a verb, "weak" after "to"/"of", "direct" right after the
    name, "before" when it came first), is one."""
    core = v.core
    if not core:
        return False
    strong = strength in ("strong", "colon")
    if v.quoted:  # a quoted value: anything but prose ("not-needed") for a password, made for a machine else
        text = core.strip()
        if not any(c.isalnum() for c in text) or _is_reference(text) or _HARMLESS_SHAPE.fullmatch(text):
            return False
        if name.rule in ("password", "password-strong", "passphrase", "code", "id"):
            return not all(_prose(word) for word in text.split())
        if strong and name.rule == "api":  # api_key="x" in an example is no key; "sk-alice" may be
            return len(text) >= 8 and not all(_prose(word) for word in text.split())
        return " " not in text and _looks_made(text)
    if _is_reference(core) or _HARMLESS_SHAPE.fullmatch(core) or _is_tech(core):
        return False
    rule = name.rule
    if rule == "password-strong":
        if not strong:
            return False
        rule = "password"
    if rule == "api":
        rule = "password" if strong else "loose"
    if rule == "webhook":
        return _looks_made(core)
    if rule == "id":
        return max(v.digits, sum(c.isdigit() for c in core)) >= name.digits and not _UNIT.match(v.rest)
    if _NUMBER.fullmatch(core):
        if rule == "loose" or name.rule == "api":  # "session_tokens=700", "the AES key is 256": a number, no key
            return False
        return _number_value(v, 4 if rule != "code" and strength in ("direct", "before") else name.digits)
    if rule == "code":  # "1234#", "A1B2"
        return sum(c.isdigit() for c in core) >= name.digits or (_mixed(core) and len(core) >= name.digits)
    if rule == "loose" or strength in ("direct", "weak"):
        return bool(_looks_made(core)) and not (strength == "weak" and rule == "loose" and not _random(core))
    # a password, a passphrase, credentials: anything but prose
    if not _WORD.fullmatch(core):  # a digit or a symbol in it
        return True
    words = v.words
    if words and not _PARTICIPLE.search(words[0].lower()):
        plain = 0
        for word in words:
            lw = word.lower()
            if lw in _STOP or lw.endswith("ly"):
                break
            plain += 1
        if plain >= (2 if rule == "passphrase" else 3):
            return True
    if strength == "before":
        return False
    if strength == "colon" and _CLAUSE_GOES_ON.match(v.rest):
        return False  # "without an API key: litellm talks to ...": a sentence after a colon, not a value
    return not _prose(core)


# a word after the value that is not a preposition: the value was the subject of a sentence
_CLAUSE_GOES_ON = re.compile(r"[ \t]+(?!(?:for|on|at|in|to|from|with|of|and|or|but)(?![A-Za-z]))[A-Za-z]",
                             re.IGNORECASE)
_MAX_CONTEXTS = 8192
_TOO_MANY = "too many credential names to check"


def _named_value(text: str, folded: str) -> str | None:
    seen: dict[tuple[int, int, str], bool] = {}  # a text of repeats is judged once per distinct context
    groups: dict[str, str] = {}
    for m in _NOUN.finditer(folded):
        start, end = m.span()
        lo = start - 48 if start > 48 else 0
        context = (start - lo, end - start, text[lo:end + _WINDOW])  # the name and what is around it
        found = seen.get(context)
        if found is None:
            if len(seen) >= _MAX_CONTEXTS:  # no memory names credentials this often: refused, not left unread
                return _TOO_MANY
            said = m.group()
            group = groups.get(said) or groups.setdefault(said, next(g for g in _ORDER if _GROUP[g].fullmatch(said)))
            found = seen[context] = _named_here(text, start, group, text[lo:start], text[end:end + _WINDOW])
        if found:
            said = m.group()
            return _NAMES[groups.get(said) or next(g for g in _ORDER if _GROUP[g].fullmatch(said))][0].label
    return None


def _named_here(text: str, start: int, group: str, before: str, w: str) -> bool:
    """Whether the name ``group`` found at ``start`` (``before`` it, ``w`` after it) has a value."""
    name = _NAMES[group][0]
    other = _OTHER_MEANING.get(group)
    if other is not None and _previous_word(before) in other:
        return False
    if _after(w, name, before):
        return True
    return _CLAUSE_END.match(w) is not None and _before(text, start, name)


def _previous_word(before: str) -> str:
    """The word right before a name ("primary" in "the primary key", "max" in "max_tokens")."""
    i = len(before)
    while i > 0 and before[i - 1] in " \t_-":
        i -= 1
    j = i
    while j > 0 and (before[j - 1].isalnum() or before[j - 1] in "/-"):
        j -= 1
    return before[j:i].lower()


def _after(w: str, name: _Name, before: str) -> bool:
    """A value after the name: "password: x", "PIN 4921", "password for staging is x"."""
    f = _FILLER.match(w)  # "the password value is x", "MYSQL_PASSWORD env to x"
    c = _CONNECTOR.match(w, f.end() if f else 0)
    if c is not None:
        strength = ("strong" if c.group("strong") else "colon" if c.group("colon") else "is" if c.group("is")
                    else "direct" if c.group("poss") else "is" if _SET_VERB.search(before) else "weak")
        v = _value_at(w, c.end())
        if v is not None and _secret_value(v, name, strength):
            return True
        if strength == "colon" and name.rule in ("loose", "password") and v is not None and (
                p := _PAIR.match(v.rest)) is not None:  # "login: ana@example.com / Movies4Ever"
            pw = _value_at(v.rest, p.end(1))
            return pw is not None and _secret_value(pw, _NAMES["password"][0], "colon")
        if c.group("weak") is None and c.group("poss") is None:
            return False
    elif (d := _DIRECT.match(w)) is not None:
        v = _value_at(w, d.end())
        if v is not None and v.quoted:  # "password 'dr0wssap'": judged as the word it quotes
            if name.rule == "passphrase" and v.core.strip():
                return True
            v = _Value(v.core, False, v.rest, [], 0) if not any(c.isspace() for c in v.core) else None
        if v is not None and _secret_value(v, name, "direct"):
            return True
    q = _QUALIFIED.match(w) or _RELATIVE.match(w)
    if q is not None:
        c = _CONNECTOR.match(w, q.end())
        if c is not None and c.group("weak") is None and c.group("poss") is None:
            v = _value_at(w, c.end())
            strength = "strong" if c.group("strong") else "colon" if c.group("colon") else "is"
            return v is not None and _secret_value(v, name, strength)
    # "the prod DB password hasn't changed: xK9#mP2$vL": a value made for a machine after ":" or "="
    a = _NEAR_ASSIGN.match(w)
    if a is not None:
        v = _value_at(w, a.end())
        return v is not None and _secret_value(v, name, "direct")
    return False


_ARTICLES = frozenset(["the", "my", "our", "your", "his", "her", "their", "its", "a", "an", "this", "that", "new",
                       "same"])
_BEFORE_VERBS = frozenset(["as", "is", "was", "=", "for"])
_MODIFIER = re.compile(r"[A-Za-z0-9'’-]{1,30}")


def _before(text: str, start: int, name: _Name) -> bool:
    """A value before the name: "use hunter2 as the password", "4921 is the door code"."""
    if start == 0 or text[start - 1] not in " \t":
        return False
    cut = max(0, start - 160)
    tokens = text[cut:start].split()
    if cut and tokens and not text[cut - 1].isspace():
        tokens = tokens[1:]  # a word cut in two is no value
    n, j = len(tokens), len(tokens) - 1
    while j >= 1 and n - j <= 5 and tokens[j].lower() not in _BEFORE_VERBS:
        j -= 1
    if j < 1 or tokens[j].lower() not in _BEFORE_VERBS:
        return False
    between = tokens[j + 1:]
    if between and between[0].lower() in _ARTICLES:
        between = between[1:]
    if len(between) > 3 or not all(_MODIFIER.fullmatch(t) for t in between):
        return False
    k, raw = j - 1, tokens[j - 1]
    if raw[-1] in "\"'`" and not (len(raw) > 1 and raw[0] == raw[-1]):  # a quoted value of several words
        while k > 0 and j - k < 8 and tokens[k][0] != raw[-1]:
            k -= 1
        raw = " ".join(tokens[k:j])
    quoted = len(raw) > 1 and raw[0] in "\"'`" and raw[-1] == raw[0]
    core = raw[1:-1] if quoted else raw.strip(".,;:!?)]}").lstrip("([{")
    if not core:
        return False
    v = _Value(core, quoted, " ", [] if quoted else _WORDS.findall(core)[:1])
    if _secret_value(v, name, "before"):
        return True
    pre = tokens[k - 1].lower() if k >= 1 else ""
    if name.rule in ("password", "passphrase") and pre in _USE_VERBS and _WORD.fullmatch(core):
        return not _prose(core)
    return False


# ---------------------------------------------------------------------------- 2. URLs

_URL_CREDENTIALS = re.compile(r"://([^\s/:@]{0,256}):([^\s/@]{1,256})@")
_URL_PLACEHOLDERS = frozenset(["password", "passwd", "pass", "pwd", "secret", "token", "x", "xxx", "***", "changeme",
                               "<password>", "pw"])
_SECRET_PARAM = re.compile(
    r"[?&;](?:access_token|refresh_token|id_token|auth_token|token|api_key|apikey|api-key|key|secret|client_secret|password"
    r"|passwd|pwd|pass|sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature"
    r"|x-goog-credential"
    r"|private_token|access_key|secret_key|session_token|sessionid|auth)=([^&#\s\"'<>]{3,256})", re.IGNORECASE)


def _url_secret(text: str) -> str | None:
    if "://" in text:
        for m in _URL_CREDENTIALS.finditer(text):
            pw = m.group(2)
            if pw.lower() not in _URL_PLACEHOLDERS and not _is_reference(pw):
                return "credentials in a URL"
    for m in _SECRET_PARAM.finditer(text):
        value = m.group(1)
        if not _is_reference(value) and value.lower() not in _URL_PLACEHOLDERS:
            return "secret parameter"
    return None


# ---------------------------------------------------------------------------- 3. cards and ids

# each starts with its first character (the scan skips to those) and then looks behind it
_CARD = re.compile(r"\d(?<![\d.,-]\d)(?:\d{3}([ -]?)\d{4}\1\d{4}\1\d{4}(?:\1\d{1,3})?|\d{3}([ -]?)\d{6}\2\d{4,5}"
                   r"|\d{12,18})(?![\d]|[.,]\d)")
_SSN = re.compile(r"(\d)(?<![\d-]\d)(\d{2})-(\d{2})-(\d{4})(?![\d-])")
_UK_NINO = re.compile(r"([A-CEGHJ-PR-TW-Z])(?<![A-Za-z0-9][A-Z])([A-CEGHJ-NPR-TW-Z])"
                      r" ?\d{2} ?\d{2} ?\d{2} ?[A-D](?![A-Za-z0-9])")
_IBAN = re.compile(r"[A-Z](?<![A-Za-z0-9][A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _issuer(digits: str) -> bool:
    """A card network's number range, at a length that network issues (Visa, Mastercard, Amex,
    Discover, Diners, JCB, UnionPay, Maestro)."""
    n, two, three, four = len(digits), int(digits[:2]), int(digits[:3]), int(digits[:4])
    if digits[0] == "4":
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16
    if two in (34, 37):
        return n == 15
    if 300 <= three <= 305 or two in (36, 38, 39):
        return 14 <= n <= 19
    if 3528 <= four <= 3589 or digits[0] == "6":
        return 16 <= n <= 19 or (digits[0] == "6" and n >= 12)
    return two in (50, 56, 57, 58) and n >= 12


def _card_or_id(text: str) -> str | None:
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and _issuer(digits) and _luhn(digits) and len(set(digits)) > 1:
            return "payment card number"
    for m in _SSN.finditer(text):
        first, rest, group, serial = m.groups()
        area = first + rest
        if area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000":
            return "US social security number"
    for m in _UK_NINO.finditer(text):
        if m.group(1) + m.group(2) not in ("BG", "GB", "NK", "KN", "TN", "NT", "ZZ"):
            return "UK national insurance number"
    for m in _IBAN.finditer(text):
        iban = m.group().replace(" ", "")
        if 15 <= len(iban) <= 34:
            moved = iban[4:] + iban[:4]
            if int("".join(str(int(c, 36)) for c in moved)) % 97 == 1:
                return "IBAN"
    return None


# ---------------------------------------------------------------------------- 5. random strings

_RUN = re.compile(r"[A-Za-z0-9+/=_-]{20,}")
_HEX = re.compile(r"[0-9a-f_-]+|[0-9A-F_-]+")
_WORDLIKE = re.compile(r"[a-z]{3,}")


def _random(token: str) -> bool:
    """Letters and digits that switch case and kind as random text does (a key), not as words do."""
    if token.isalpha() and (token.islower() or token.isupper()):
        return False  # one case of letters only: a word, or a line of one character
    alnum = [c for c in token if c.isalnum()]
    n = len(alnum)
    if n < 20:
        return False
    kinds = ["u" if c.isupper() else "l" if c.islower() else "d" for c in alnum]
    has = set(kinds)
    digits = kinds.count("d")
    switches = sum(a != b for a, b in pairwise(kinds)) / (n - 1)
    counts: dict[str, int] = {}
    for c in alnum:
        counts[c] = counts.get(c, 0) + 1
    entropy = -sum(k / n * math.log2(k / n) for k in counts.values())
    if sum(len(w) for w in _WORDLIKE.findall(token)) >= n / 2:
        return False  # mostly words ("BetaMemoryTool20250818ViewCommand"): an identifier
    if all(len(part) < 4 or _HEX.fullmatch(part) or (part.isalpha() and part.islower())
           for part in re.split(r"[-_]", token)):
        return False  # words and hex joined ("user_ab12cd34_account_1f2e3d4c-0000-4000-..."): ids
    if has == {"u", "l", "d"}:
        return digits >= 2 and switches >= 0.3 and entropy >= 3.5
    if has == {"u", "d"}:  # base32 (2FA seeds): few digits; a long upper-case word is rare in prose
        return n >= 24 and digits >= 2 and entropy >= 4.0
    if has == {"l", "d"}:
        return n >= 24 and digits >= 4 and switches >= 0.2 and entropy >= 3.5
    if has == {"u", "l"}:
        return n >= 32 and switches >= 0.45 and entropy >= 4.0
    return False


def _random_run(text: str) -> bool:
    for m in _RUN.finditer(text):
        s, e = m.span()
        if (s > 0 and text[s - 1] in ".@:\\") or (e < len(text) and text[e] == "." and e + 1 < len(text)
                                                  and text[e + 1].isalnum()) or text.endswith(";base64,", 0, s):
            continue  # a host name, an email address, a file name, the data of a data: URI (an image)
        if _random(m.group()[:256]):  # a key is shorter; a long blob is judged by its start
            return True
    return False


# ---------------------------------------------------------------------------- 6. password-shaped words

_CHUNK = re.compile(r"(?<!\S)[^\s!@#$%^&*?~]*+[!@#$%^&*?~]\S*+")  # a word with a symbol, from its start
_SHAPE_PARTS = re.compile(r"[()\[\]{}<>,;=]")
_SHAPE_SYMBOLS = frozenset("!@#$%^&*?~")
_NOT_A_WORD = re.compile(r"://|%[0-9A-Fa-f]{2}|A-Z|a-z|0-9|\\")  # a URL, percent-encoding, a regex


def _password_shaped(text: str) -> bool:
    """A word no prose has, without a name: upper and lower case letters, digits and a symbol
    ("Winter#2025", "'Winter2025!'"); the symbol inside the word unless the word is quoted (a
    sentence may end "... Python3!"). URLs, regexes and code punctuation are not such words."""
    seen: set[str] = set()  # a text of repeats is judged once per distinct word
    for m in _CHUNK.finditer(text):
        chunk = m.group()
        if len(chunk) < 8 or chunk in seen or _NOT_A_WORD.search(chunk):
            continue
        seen.add(chunk)
        bare = chunk.rstrip(".,:;!?)") if chunk[0] not in "'\"`" else chunk.rstrip(".,:;)")
        quoted = len(bare) > 2 and bare[0] in "'\"`" and bare[-1] == bare[0]
        for word in _SHAPE_PARTS.split(bare.strip("'\"`") if quoted else bare):
            if not 8 <= len(word) <= 64:
                continue
            inner = word if quoted else word[1:-1]
            if not any(c in _SHAPE_SYMBOLS for c in inner):
                continue
            if not (any(c.isupper() for c in word) and any(c.islower() for c in word)
                    and any(c.isdigit() for c in word)):
                continue
            if _HARMLESS_SHAPE.fullmatch(word.rstrip(".,:!?")) or _is_reference(word):
                continue
            return True
    return False


# ---------------------------------------------------------------------------- the rule

#: every kind ``find_secret`` may answer: fixed names, never a piece of the text
KINDS: frozenset[str] = frozenset(
    [f.kind for f in SECRET_PATTERNS] + [n.label for n, _ in _NAMES.values()]
    + ["credentials in a URL", "secret parameter", "payment card number", "US social security number",
       "UK national insurance number", "IBAN", "random-looking key", "password-shaped word", _TOO_MANY])


def find_secret(text: str) -> str | None:
    """The kind of secret ``text`` seems to hold ("OpenAI API key", "password", ...), or None."""
    folded = _folded(text)
    for f in SECRET_PATTERNS:
        t = folded if f.folded else text
        if any(n in t for n in f.needles):
            for m in f.pattern.finditer(t):
                if f.check is None or f.check(t, m):
                    return f.kind
    return _url_secret(text) or _card_or_id(text) or _named_value(text, folded) or (
        "random-looking key" if _random_run(text) else None) or (
        "password-shaped word" if _password_shaped(text) else None)
