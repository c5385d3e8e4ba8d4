"""msgraph-sdk: GraphServiceClient on its default request adapter, whose default middleware
includes Kiota's RetryHandler at its defaults. A GET lists the users (GET /users); a POST
creates one (POST /users). The base URL is the URL given (the upstream's /v1.0, never
Microsoft's host). The adapter's httpx client reads HTTP_PROXY itself (trust_env, httpx's
default). Authentication is a static bearer token: the SDK's usual Azure Identity provider
would fetch a token over the network.

Usage: msgraph_client.py METHOD URL. Exits 0 on success, 1 otherwise.
"""
import asyncio
import sys

import httpx
from kiota_abstractions.api_error import APIError
from kiota_abstractions.authentication import (
    AccessTokenProvider,
    AllowedHostsValidator,
    BaseBearerTokenAuthenticationProvider,
)
from msgraph import GraphRequestAdapter, GraphServiceClient
from msgraph.generated.models.password_profile import PasswordProfile
from msgraph.generated.models.user import User


class StaticToken(AccessTokenProvider):
    """The same token for every request, from no identity service."""

    async def get_authorization_token(self, uri, additional_authentication_context=None):
        return "matrix-token"

    def get_allowed_hosts_validator(self):
        return AllowedHostsValidator([])


async def main(method, url):
    adapter = GraphRequestAdapter(BaseBearerTokenAuthenticationProvider(StaticToken()))
    adapter.base_url = url
    client = GraphServiceClient(request_adapter=adapter)
    if method == "POST":
        await client.users.post(User(
            account_enabled=True, display_name="Matrix", mail_nickname="matrix",
            user_principal_name="matrix@example.com",
            password_profile=PasswordProfile(password="matrix-password")))
    else:
        await client.users.get()


try:
    asyncio.run(main(sys.argv[1], sys.argv[2]))
except APIError as error:
    print(f"{type(error).__name__}: {error.response_status_code}", file=sys.stderr)
    sys.exit(1)
except httpx.HTTPError as error:
    print(f"{type(error).__name__}: {error}", file=sys.stderr)
    sys.exit(1)
