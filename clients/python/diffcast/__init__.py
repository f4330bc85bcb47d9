"""Client of diffcastd: requests, subscriptions and a self-verifying mirror of collections."""

from .client import CannotConnect, Client, DiffcastError, connect_with_retry, default_socket
from .mirror import Divergence, Mirror, canonical, parse_preserving

__all__ = [
    "CannotConnect", "Client", "DiffcastError", "Divergence", "Mirror", "canonical", "connect_with_retry", "default_socket",
    "parse_preserving",
]
__version__ = "0.3.0"
