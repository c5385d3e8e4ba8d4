# Ruby's Net::HTTP as its users write it: Net::HTTP.get_response, which reads https_proxy, and
# OpenSSL, which reads SSL_CERT_FILE. It retries a 429 once its delay-seconds Retry-After has
# passed. Usage: ruby client.rb URL. Prints the body; exits 1 if still throttled.
require "net/http"
require "uri"

uri = URI(ARGV[0])
3.times do
  response = Net::HTTP.get_response(uri)
  if response.code != "429"
    puts response.body
    exit 0
  end
  sleep Integer(response["retry-after"].strip)
end
exit 1
