"""Whether an :class:`~mcpsync.auth.oauth.OAuth` object's tokens are DPoP-bound, and with what.

Owns :class:`DPoPBinding`, a member of ``OAuth`` holding its DPoP state: the configured
mode (``dpop=True`` / ``False`` / ``"auto"``) and preferred algorithm, the prover of the
next token request (its key), the per-origin nonce cache, and what the MCP server said of
DPoP (its challenge, its resource metadata). It decides:

- ``select``: whether the next token request asks for a DPoP-bound token. ``True`` always,
  ``False`` never, ``"auto"`` (default) when *both* sides speak it: the MCP server (a
  ``DPoP`` challenge, or ``dpop_signing_alg_values_supported`` /
  ``dpop_bound_access_tokens_required`` in its resource metadata) and the authorization
  server (its ``dpop_signing_alg_values_supported``). An authorization server that offers
  DPoP in front of a server that only takes Bearer tokens gets Bearer requests
  (oidc-provider advertises DPoP by default). A server that takes *only* DPoP (its
  challenge, or the metadata's ``..._required``) gets DPoP whatever the AS advertises;
- ``for_token``: the prover a refresh of a token must use (the token's own key);
- ``check``: a Bearer token issued for a server that takes only DPoP is refused.

The proofs themselves, keys and nonces are :mod:`.dpop`'s.
"""

from __future__ import annotations

from ._util import log, short
from .discovery import AuthServerMetadata, ProtectedResourceMetadata
from .dpop import (
    EXTRA_HINT,
    DPoPError,
    DPoPKey,
    DPoPProver,
    NonceCache,
    choose_alg,
    dpop_available,
    require_cryptography,
)
from .flow import TokenSet

__all__: list[str] = []  # private to mcpsync.auth


class DPoPBinding:
    """The DPoP state of one ``OAuth`` object (see the module doc)."""

    def __init__(self, mode: bool | str, algorithm: str) -> None:
        #: ``dpop=``: True, False or "auto"
        self.mode = mode
        #: ``dpop_algorithm=``: the proof algorithm preferred
        self.algorithm = algorithm
        #: the prover of the next token request (None: ask for a Bearer token)
        self.prover: DPoPProver | None = None
        #: ``DPoP-Nonce`` values per origin (the AS's and the MCP server's)
        self.nonces = NonceCache()
        #: the MCP server's last challenge was DPoP only (it takes only DPoP)
        self.challenged = False
        #: the MCP server's last challenge named DPoP
        self.server = False
        #: the MCP server requires DPoP-bound tokens (its challenge or its metadata)
        self.required = False
        #: the algorithms the MCP server's DPoP challenge named (``algs``), if it did
        self.rs_algs: list[str] | None = None

    def note_challenge(self, *, dpop_only: bool, dpop_named: bool, algs: list[str]) -> None:
        """What the MCP server's 401/403 said of DPoP (before a new token is obtained)."""
        self.challenged = dpop_only
        self.server = dpop_named
        self.rs_algs = algs or None

    def key_of(self, key: DPoPKey) -> None:
        """A stored DPoP-bound token is presented: its renewals sign with its key too."""
        if self.prover is None:
            self.prover = DPoPProver(key, self.nonces)

    def select(
        self,
        prm: ProtectedResourceMetadata | None,
        asm: AuthServerMetadata,
        token: TokenSet | None,
        server: str,
    ) -> None:
        """Decide whether the next token request asks for a DPoP-bound token (``prover``);
        ``token`` is the current one (its key is kept), ``server`` names the MCP server."""
        required = self.challenged or (prm is not None and prm.dpop_bound_access_tokens_required)
        self.required = required
        offered = asm.dpop_signing_alg_values_supported
        rs_algs = self.rs_algs or (prm.dpop_signing_alg_values_supported if prm else None)
        if offered and rs_algs and set(offered) & set(rs_algs):
            offered = [a for a in offered if a in rs_algs]  # what both servers accept
        server_takes = (
            required
            or self.server
            or (prm is not None and prm.dpop_signing_alg_values_supported is not None)
        )
        mode = self.mode
        self.prover = None
        if mode is False:
            if required:
                raise DPoPError(
                    f"{short(server)} requires DPoP-bound tokens, but this OAuth object has "
                    "dpop=False",
                    step="discovery",
                )
            return
        if mode == "auto" and not required and not (offered and server_takes):
            return
        if not dpop_available() and mode == "auto" and not required:
            log.info("%s offers DPoP; using Bearer: no 'cryptography' (%s)", asm.issuer, EXTRA_HINT)
            return
        require_cryptography("discovery")
        alg = choose_alg(offered, self.algorithm)
        if alg is None:
            if required or mode is True:
                raise DPoPError(
                    f"{asm.issuer} accepts DPoP proofs signed with {', '.join(offered or [])[:200]}"
                    "; mcpsync signs ES256/ES384/ES512/EdDSA",
                    step="discovery",
                )
            return
        if token is not None and token.dpop_key is not None and token.dpop_key.alg == alg:
            self.prover = DPoPProver(token.dpop_key, self.nonces)  # one key per client
        else:
            self.prover = DPoPProver(DPoPKey.generate(alg), self.nonces)

    def for_token(self, tok: TokenSet) -> DPoPProver | None:
        """The prover a refresh of ``tok`` must use (its own key; RFC 9449 section 5)."""
        return DPoPProver(tok.dpop_key, self.nonces) if tok.dpop_key is not None else None

    def check(self, tok: TokenSet, server: str) -> None:
        """Refuse a Bearer token for a server that takes only DPoP-bound ones."""
        if self.required and tok.token_type != "DPoP":
            raise DPoPError(
                f"{short(server)} requires DPoP-bound tokens, but "
                f"{tok.issuer or 'the authorization server'} issued a Bearer token; "
                "not presenting it as Bearer",
                step="token response",
            )
