"""anthropic-python: client.messages.create, default max_retries (2). The base URL is the URL
given; the SDK sends a POST whatever METHOD is.

Usage: anthropic_client.py METHOD URL. Exits 0 on success, 1 otherwise.
"""
import sys

import anthropic

client = anthropic.Anthropic(base_url=sys.argv[2], api_key="sk-ant-matrix")
try:
    client.messages.create(model="claude-3-5-haiku-latest", max_tokens=16,
                           messages=[{"role": "user", "content": "hi"}])
except anthropic.AnthropicError as error:
    print(error, file=sys.stderr)
    sys.exit(1)
