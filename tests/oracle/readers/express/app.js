'use strict';
// Oracle reader: what an Express 5 app signing in with passport-local reads as
// the account name (protocol and observations: README.md beside this file).
// The packages live in $ROOT/.tools/oracle/express (install.sh puts them there).
const path = require('path');
const { createRequire } = require('module');

const ROOT = path.resolve(__dirname, '..', '..', '..', '..');
const need = createRequire(path.join(ROOT, '.tools', 'oracle', 'express', 'package.json'));
const express = need('express');
const passport = need('passport');
const LocalStrategy = need('passport-local').Strategy;

// ASCII-only JSON: every code point (lone surrogates included) as a \u escape.
function asciiJson(value) {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g,
    (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

function answer(res, status, body) {
  res.status(status).type('application/json').send(asciiJson(body));
}

// The verify callback is where an application would look the account up: it
// records the username passport-local hands it and reports "no such user".
passport.use(new LocalStrategy((username, password, done) => {
  done(null, false, { recorded: username });
}));

const app = express();
app.use(express.json());
app.use(express.urlencoded({ extended: true }));
app.use(passport.initialize());

function login(req, res, next) {
  passport.authenticate('local', { session: false }, (err, user, info, status) => {
    if (err) { return next(err); }
    if (info && Object.prototype.hasOwnProperty.call(info, 'recorded')) {
      const v = info.recorded;
      if (typeof v === 'string') {
        return answer(res, 200, { account: v });
      }
      // passport-local passes non-object primitives through (numbers, true);
      // arrays and objects never reach verify (its lookup returns null).
      return answer(res, 200, { account: null, why: 'username is a ' + typeof v, value: v });
    }
    const why = (info && info.message) || 'authentication not reached';
    return answer(res, status || 400, { account: null, why });
  })(req, res, next);
}

app.post('/up/login', login);
app.post('/up/form-login', login);

app.post('/up/hdr-login', (req, res) => {
  const v = req.get('x-login');
  if (v === undefined) {
    return answer(res, 400, { account: null, why: 'no x-login header' });
  }
  return answer(res, 200, { account: v });
});

// Body-parser errors (malformed JSON, unsupported charset, too large, ...)
// still answer JSON.
app.use((err, req, res, next) => {
  const status = err.status || err.statusCode || 500;
  answer(res, status, { account: null, why: String(err.type || err.message || err) });
});

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  console.error('usage: serve PORT');
  process.exit(2);
}
const server = app.listen(port, '127.0.0.1', (err) => {
  if (err) { console.error(err); process.exit(1); }
  process.stdout.write('ready\n');
});
server.on('error', (err) => { console.error(err); process.exit(1); });
process.on('SIGTERM', () => process.exit(0));
