# frozen_string_literal: true
#
# Oracle reader: which account name do Rack 2.2 / Rails' ActionDispatch (actionpack
# 6.1) / Devise read from a sign-in request?  Started by ./serve PORT.
#
# Every endpoint runs the framework's own parsing up to the point where a Devise app
# would look the account up (Devise::ParameterFilter, i.e. what
# find_for_authentication hands to the database) and answers
#   {"account": "<string>", "raw": "<value before Devise's downcase/strip>"}
# or {"account": null, "why": "<reason>"}.  JSON answers are ASCII-only: every char
# outside U+0020..U+007E is a \uXXXX escape of its UTF-16 code unit.  Strings are Ruby
# byte strings: a 3-byte encoded surrogate (what Ruby's JSON makes of a lone "\udc00")
# comes out as that lone code unit; any other byte that is not UTF-8 comes out as
# U+FFFD, with "invalid_utf8": true and "account_hex" (the exact bytes) added.

require "json"
require "rack"
require "active_support"
require "active_support/core_ext/object/blank"
begin
  require "active_support/json"
  require "action_dispatch"
  RAILS_PARAMS = true
rescue LoadError
  RAILS_PARAMS = false
end
require "devise/parameter_filter"

module Reader
  module_function

  # Devise with the brief's config: authentication_keys = case_insensitive_keys =
  # strip_whitespace_keys = [:username] (Devise's shipped default names :email).
  DEVISE_FILTER = Devise::ParameterFilter.new([:username], [:username])

  def call(env)
    return answer(405, nil, "method #{env['REQUEST_METHOD']} (POST only)") unless env["REQUEST_METHOD"] == "POST"

    case env["PATH_INFO"]
    when "/up/login" then devise(rails_params(env))
    when "/up/rails-form-login" then devise(rails_params(env))
    when "/up/form-login" then devise(Rack::Request.new(env).params)
    when "/up/hdr-login"
      raw = env["HTTP_X_LOGIN"]
      return answer(400, nil, "no x-login header") if raw.nil?

      answer(200, raw.strip, nil, raw: raw)
    else
      answer(404, nil, "no such endpoint")
    end
  rescue StandardError, ScriptError => e
    answer(400, nil, "#{e.class}: #{e.message}"[0, 200])
  end

  # The parameters a Rails controller (and Devise's Warden strategy, via
  # devise/rails/warden_compat) sees: ActionDispatch::Request#params, i.e. the body
  # (JSON through ActionDispatch's JSON params parser, else Rack's form parser)
  # merged with the query string, the query string winning.
  def rails_params(env)
    return ActionDispatch::Request.new(env).params if RAILS_PARAMS

    # Fallback without actionpack: Ruby's JSON for a JSON body, merged as Rails merges.
    req = Rack::Request.new(env)
    body = if req.media_type == "application/json" && req.content_length.to_i.positive?
             data = JSON.parse(req.body.read)
             data.is_a?(Hash) ? data : { "_json" => data }
           else
             req.POST
           end
    body.merge(req.GET)
  end

  # Devise::Strategies::Authenticatable#parse_authentication_key_values requires
  # params[key].presence, then find_for_authentication runs Devise::ParameterFilter
  # (to_s of the value, downcase, then strip).  The password is not required here.
  def devise(params)
    raw = params["username"]
    return answer(200, nil, "username blank or missing (Devise presence check)", raw: raw) if raw.blank?

    answer(200, DEVISE_FILTER.filter({ username: raw })[:username], nil, raw: raw)
  end

  def answer(status, account, why, raw: :none)
    members = { "account" => account }
    members["why"] = why if why
    members["raw"] = raw.is_a?(String) || raw.nil? ? raw : raw.inspect unless raw == :none
    if account.is_a?(String) && !utf8_units(account)[1]
      members["invalid_utf8"] = true
      members["account_hex"] = account.unpack1("H*")
    end
    body = "{" + members.map { |k, v| "#{quote(k)}: #{v.nil? ? 'null' : v == true ? 'true' : quote(v)}" }.join(", ") + "}\n"
    [status, { "Content-Type" => "application/json", "Content-Length" => body.bytesize.to_s }, [body]]
  end

  # JSON string literal, ASCII only, from a Ruby string's bytes read as UTF-8.
  def quote(str)
    units, = utf8_units(str)
    out = +'"'
    units.each do |u|
      out << if u == 0x22 then '\\"'
             elsif u == 0x5c then "\\\\"
             elsif u < 0x20 || u > 0x7e then format("\\u%04x", u)
             else u.chr
             end
    end
    out << '"'
  end

  # [UTF-16 code units, valid UTF-8?]: well-formed UTF-8 sequences, and encoded
  # surrogates as the code unit they encode (not valid UTF-8); any other byte
  # becomes U+FFFD (not valid either).
  def utf8_units(str)
    str = str.encode(Encoding::UTF_8) unless [Encoding::UTF_8, Encoding::BINARY, Encoding::US_ASCII].include?(str.encoding)
    bytes = str.b.bytes
    units = []
    valid = true
    i = 0
    while i < bytes.length
      c = bytes[i]
      if c < 0x80
        units << c
        i += 1
        next
      end
      n, min, cp = if c.between?(0xC2, 0xDF) then [1, 0x80, c & 0x1F]
                   elsif c.between?(0xE0, 0xEF) then [2, 0x800, c & 0x0F]
                   elsif c.between?(0xF0, 0xF4) then [3, 0x10000, c & 0x07]
                   end
      if n && bytes[i + 1, n].length == n && bytes[i + 1, n].all? { |b| (b & 0xC0) == 0x80 }
        bytes[i + 1, n].each { |b| cp = (cp << 6) | (b & 0x3F) }
        if cp >= min && cp <= 0x10FFFF
          valid = false if cp.between?(0xD800, 0xDFFF) # encoded lone surrogate: not UTF-8
          if cp >= 0x10000
            cp -= 0x10000
            units << (0xD800 + (cp >> 10)) << (0xDC00 + (cp & 0x3FF))
          else
            units << cp
          end
          i += n + 1
          next
        end
      end
      units << 0xFFFD
      valid = false
      i += 1
    end
    [units, valid]
  end
end
