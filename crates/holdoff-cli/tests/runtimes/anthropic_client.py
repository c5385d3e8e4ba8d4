# anthropic-python as its users write it: its own retries honour Retry-After, and its httpx
# client reads HTTPS_PROXY and SSL_CERT_FILE. Usage: python anthropic_client.py BASE_URL.
# Prints the first model's id.
import sys

import anthropic

client = anthropic.Anthropic(api_key="holdoff-test", base_url=sys.argv[1], max_retries=2)
print(client.models.list().data[0].id)
