"""openai-python 1.x: client.chat.completions.create, default max_retries (2). The base URL is
the URL given; GET is not something this SDK sends for a chat completion, so both methods send
the SDK's POST (the GET scenarios throttle its first request all the same).

Usage: openai_client.py METHOD URL. Exits 0 on success, 1 otherwise.
"""
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[2], api_key="sk-matrix")
try:
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
except openai.OpenAIError as error:
    print(error, file=sys.stderr)
    sys.exit(1)
