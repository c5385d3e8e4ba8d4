# aiohttp as its users write it, with trust_env=True: without it aiohttp reads neither
# HTTPS_PROXY nor SSL_CERT_FILE. It retries a 429 once its delay-seconds Retry-After has passed.
# Usage: python aiohttp_client.py URL. Prints the body; exits 1 if still throttled.
import asyncio
import sys

import aiohttp


async def main(url):
    async with aiohttp.ClientSession(trust_env=True) as session:
        for _ in range(3):
            async with session.get(url) as response:
                body = await response.text()
                if response.status != 429:
                    print(body)
                    return 0
                await asyncio.sleep(int(response.headers["retry-after"].strip()))
    return 1


sys.exit(asyncio.run(main(sys.argv[1])))
