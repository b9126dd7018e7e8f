// Certificates in CZMQ's and pyzmq's layouts, every refusal with its message, files on disk, and
// the keys at work: a real CURVE handshake over TCP loopback, and the monitor that says why one
// failed.
#include "schema/curve-cert.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "schema/handshake-monitor.h"
#include "tests/curve-server.h"

namespace hearth::net {
namespace {

using testing::curve_server;
using testing::poll_in;
using testing::zap_handler;

// The server key pair of libzmq's own CURVE tests (also in the ZeroMQ guide).
constexpr const char* k_public = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
constexpr const char* k_secret = "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6";

// As `zcert_save_secret` of CZMQ writes it, with a nested metadata entry and a trailing comment.
std::string czmq_secret_text(const std::string& pub = k_public, const std::string& sec = k_secret) {
  return "#   ****  Generated on 2015-01-01 00:00:00 by CZMQ  ****\n"
         "#   ZeroMQ CURVE **Secret** Certificate\n"
         "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n"
         "\n"
         "metadata\n"
         "    name = \"node-a\"\n"
         "    site = \"attic\"   # where it runs\n"
         "        rack = 2\n"
         "curve\n"
         "    public-key = \"" +
         pub +
         "\"\n"
         "    secret-key = \"" +
         sec + "\"\n";
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "curve_cert_" + name;
}

void expect_error(const result<curve_cert>& r, const std::string& needle) {
  ASSERT_FALSE(r) << "parsed";
  EXPECT_NE(r.message().find(needle), std::string::npos) << r.message();
}

TEST(CurveCert, GeneratedKeysRoundTripThroughBothTexts) {
  auto c = curve_cert_generate("node-a");
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->public_key.size(), z85_key_chars);
  EXPECT_EQ(c->secret_key.size(), z85_key_chars);
  auto secret = curve_cert_parse(curve_cert_secret_text(*c), "node-a.key");
  ASSERT_TRUE(secret) << secret.message();
  EXPECT_EQ(secret->public_key, c->public_key);
  EXPECT_EQ(secret->secret_key, c->secret_key);
  EXPECT_EQ(secret->name, "node-a");
  auto pub = curve_cert_parse(curve_cert_public_text(*c), "node-a.pub");
  ASSERT_TRUE(pub) << pub.message();
  EXPECT_EQ(pub->public_key, c->public_key);
  EXPECT_TRUE(pub->secret_key.empty());
  EXPECT_EQ(curve_cert_public_text(*c).find(c->secret_key), std::string::npos);
  auto other = curve_cert_generate("node-b");
  ASSERT_TRUE(other);
  EXPECT_NE(other->secret_key, c->secret_key);
}

TEST(CurveCert, WritersUseCzmqsLayout) {
  const curve_cert c{k_public, k_secret, "node-a"};
  const std::string text = curve_cert_secret_text(c);
  ASSERT_TRUE(text.starts_with("#   ****  Generated on ")) << text;
  const std::string rest = text.substr(text.find(" by hearth  ****\n"));
  EXPECT_EQ(rest,
            " by hearth  ****\n"
            "#   ZeroMQ CURVE **Secret** Certificate\n"
            "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n"
            "\n"
            "metadata\n"
            "    name = \"node-a\"\n"
            "curve\n"
            "    public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n"
            "    secret-key = \"JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6\"\n");
  const std::string pub = curve_cert_public_text(c);
  EXPECT_NE(pub.find("#   ZeroMQ CURVE Public Certificate\n"), std::string::npos) << pub;
  EXPECT_TRUE(
      pub.ends_with("\nmetadata\n    name = \"node-a\"\ncurve\n"
                    "    public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n"))
      << pub;
}

TEST(CurveCert, ReadsAHandWrittenCzmqFileWithCrlf) {
  auto c = curve_cert_parse(czmq_secret_text(), "czmq.key");
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->public_key, k_public);
  EXPECT_EQ(c->secret_key, k_secret);
  EXPECT_EQ(c->name, "node-a");
  std::string crlf;
  for (char ch : czmq_secret_text()) crlf += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
  auto d = curve_cert_parse(crlf, "crlf.key");
  ASSERT_TRUE(d) << d.message();
  EXPECT_EQ(d->secret_key, k_secret);
}

// zmq.auth.create_certificates: metadata values bare, keys quoted, "by pyzmq".
TEST(CurveCert, ReadsPyzmqsLayout) {
  const std::string text =
      "#   ****  Generated on 2026-11-23 22:10:00.123456 by pyzmq  ****\n"
      "#   ZeroMQ CURVE Public Certificate\n"
      "#   Exchange securely, or use a secure mechanism to verify the contents\n"
      "#   of this file after exchange. Store public certificates in your home\n"
      "#   directory, in the .curve subdirectory.\n"
      "\n"
      "metadata\n"
      "    name = server\n"
      "curve\n"
      "    public-key = \"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"\n";
  auto c = curve_cert_parse(text, "server.key");
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->public_key, k_public);
  EXPECT_TRUE(c->secret_key.empty());
  EXPECT_EQ(c->name, "server");
  // A bare key may hold '#', a Z85 character.
  auto bare = curve_cert_parse("curve\n    public-key = " + std::string(39, 'a') + "#  # comment\n",
                               "bare.pub");
  ASSERT_TRUE(bare) << bare.message();
  EXPECT_EQ(bare->public_key, std::string(39, 'a') + "#");
}

TEST(CurveCert, MismatchedKeysAreRefusedNamingTheLines) {
  auto other = curve_cert_generate("");
  ASSERT_TRUE(other);
  expect_error(curve_cert_parse(czmq_secret_text(other->public_key), "client.key"),
               "client.key: line 10: public-key does not belong to the secret-key on line 11");
}

TEST(CurveCert, BadZ85IsRefusedNamingFileAndLine) {
  std::string short_secret = k_secret;
  short_secret.pop_back();
  expect_error(curve_cert_parse(czmq_secret_text(k_public, short_secret), "client.key"),
               "client.key: line 11: secret-key is 39 characters; a Z85 key has 40");
  std::string tilde = k_public;
  tilde[3] = '~';
  expect_error(curve_cert_parse(czmq_secret_text(tilde), "client.key"),
               "client.key: line 10: public-key has a character that is not Z85 at position 4");
  // Every character of the alphabet, but a group decodes past 2^32.
  expect_error(curve_cert_parse("curve\n    public-key = \"" + std::string(40, '#') + "\"\n", "x"),
               "x: line 2: public-key is not a valid Z85 key");
}

TEST(CurveCert, TruncatedAndMalformedFilesAreRefused) {
  const std::string full = czmq_secret_text();
  // Cut inside the secret key: its quote never closes.
  expect_error(curve_cert_parse(full.substr(0, full.size() - 12), "cut.key"),
               "cut.key: line 11: a quoted value without its closing quote");
  // Cut before the curve section.
  expect_error(curve_cert_parse(full.substr(0, full.find("curve")), "cut2.key"),
               "cut2.key: no 'curve' section");
  expect_error(curve_cert_parse("curve\n", "empty.pub"), "the 'curve' section has no public-key");
  expect_error(curve_cert_parse("curve\n  public-key = \"x\"\n", "two.pub"),
               "two.pub: line 2: indented by 2 spaces");
  expect_error(curve_cert_parse("curve\n\tpublic-key = \"x\"\n", "tab.pub"), "a tab");
  expect_error(curve_cert_parse("    public-key = \"x\"\n", "orphan.pub"), "before any section");
  expect_error(curve_cert_parse("curve\n    public-key \"x\"\n", "eq.pub"), "expected '='");
  expect_error(curve_cert_parse("metadata = 3\ncurve\n", "top.pub"), "must be a section");
  constexpr char with_nul[] = "curve\n    public-key = \"a\0b\"\n";
  expect_error(curve_cert_parse(std::string(with_nul, sizeof with_nul - 1), "nul.pub"),
               "nul.pub: line 2: a NUL byte");
  expect_error(curve_cert_parse("\x7f"
                                "ELF\x02\x01\x01",
                                "elf"),
               "elf: no 'curve' section");
  const std::string twice = full + "curve\n";
  expect_error(curve_cert_parse(twice, "twice.key"), "a second 'curve' section");
}

TEST(CurveCert, OversizeInputIsRefused) {
  const std::string big = std::string(64 * 1024, '#') + "\n" + czmq_secret_text();
  expect_error(curve_cert_parse(big, "big.key"), "at most 64 KiB");
  const std::string path = temp_path("big.key");
  std::ofstream(path) << big;
  expect_error(curve_cert_load(path), "more than 64 KiB");
  expect_error(curve_cert_load(temp_path("does-not-exist.key")), "cannot read the certificate");
}

TEST(CurveCert, SaveWritesBothFilesWithTheirModesAndNeverOverwrites) {
  const std::string dir = temp_path("save/nested");
  std::filesystem::remove_all(temp_path("save"));
  auto c = curve_cert_generate("node-a");
  ASSERT_TRUE(c);
  auto r = curve_cert_save(*c, dir, "node-a");
  ASSERT_TRUE(r) << r.message();
  struct stat st {};
  ASSERT_EQ(stat((dir + "/node-a.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat((dir + "/node-a.pub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  auto secret = curve_cert_load_secret(dir + "/node-a.key");
  ASSERT_TRUE(secret) << secret.message();
  EXPECT_EQ(secret->secret_key, c->secret_key);
  auto pub = curve_cert_load(dir + "/node-a.pub");
  ASSERT_TRUE(pub) << pub.message();
  EXPECT_EQ(pub->public_key, c->public_key);
  expect_error(curve_cert_load_secret(dir + "/node-a.pub"), "a public certificate");

  auto again = curve_cert_generate("node-a");
  r = curve_cert_save(*again, dir, "node-a");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("exists; not overwriting it"), std::string::npos) << r.message();
  EXPECT_EQ(curve_cert_load_secret(dir + "/node-a.key")->secret_key, c->secret_key);
  // Only the public half there: still refused, and no secret file appears.
  std::filesystem::remove(dir + "/node-a.key");
  ASSERT_FALSE(curve_cert_save(*again, dir, "node-a"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/node-a.key"));
}

TEST(CurveCert, ClientKeysNeedBothFilesOrNeither) {
  auto none = curve_client_keys_load("", "");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->enabled());
  auto only_broker = curve_client_keys_load("broker.pub", "");
  ASSERT_FALSE(only_broker);
  EXPECT_NE(only_broker.message().find("own secret key (key)"), std::string::npos)
      << only_broker.message();
  auto only_own = curve_client_keys_load("", "client.key");
  ASSERT_FALSE(only_own);
  EXPECT_NE(only_own.message().find("broker's public key (broker-key)"), std::string::npos)
      << only_own.message();

  const std::string dir = temp_path("client-keys");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(curve_cert_save(*curve_cert_generate("broker"), dir, "broker"));
  ASSERT_TRUE(curve_cert_save(*curve_cert_generate("client"), dir, "client"));
  auto keys = curve_client_keys_load(dir + "/broker.pub", dir + "/client.key");
  ASSERT_TRUE(keys) << keys.message();
  EXPECT_TRUE(keys->enabled());
  EXPECT_EQ(keys->broker_public, curve_cert_load(dir + "/broker.pub")->public_key);
  EXPECT_EQ(keys->own.secret_key, curve_cert_load(dir + "/client.key")->secret_key);
  auto swapped = curve_client_keys_load(dir + "/broker.pub", dir + "/client.pub");
  ASSERT_FALSE(swapped);
  EXPECT_NE(swapped.message().find("client.pub: a public certificate"), std::string::npos)
      << swapped.message();
}

// --- the keys at work ---------------------------------------------------------------------------

zmq::socket_t curve_dealer(zmq::context_t& ctx, const curve_client_keys& keys) {
  zmq::socket_t d(ctx, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  curve_client_apply(d, keys);
  return d;
}

// Polls the monitor until `done` holds or the time is up.
bool watch(handshake_monitor& m, const std::function<bool()>& done,
           std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < until) {
    poll_in(m.events(), std::chrono::milliseconds(50));
    m.update();
  }
  return done();
}

TEST(CurveHandshake, TheRightKeysTalkAndAWrongServerKeyGetsNothing) {
  zmq::context_t ctx(1);
  auto server_cert = curve_cert_generate("broker");
  auto client_cert = curve_cert_generate("client");
  ASSERT_TRUE(server_cert && client_cert);
  curve_server server(ctx, *server_cert);

  const curve_client_keys keys{server_cert->public_key, *client_cert};
  zmq::socket_t dealer = curve_dealer(ctx, keys);
  handshake_monitor monitor(ctx, dealer);
  dealer.connect(server.endpoint);
  dealer.send(zmq::str_buffer("ping"), zmq::send_flags::none);
  ASSERT_TRUE(poll_in(server.sock, std::chrono::seconds(5)));
  std::vector<zmq::message_t> parts;
  ASSERT_TRUE(zmq::recv_multipart(server.sock, std::back_inserter(parts)));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].to_string(), "ping");
  server.sock.send(parts[0], zmq::send_flags::sndmore);
  server.sock.send(zmq::str_buffer("pong"), zmq::send_flags::none);
  ASSERT_TRUE(poll_in(dealer, std::chrono::seconds(5)));
  zmq::message_t reply;
  ASSERT_TRUE(dealer.recv(reply));
  EXPECT_EQ(reply.to_string(), "pong");
  EXPECT_TRUE(watch(monitor, [&] { return monitor.succeeded(); }));
  EXPECT_TRUE(monitor.connected());

  auto impostor = curve_cert_generate("impostor");
  ASSERT_TRUE(impostor);
  zmq::socket_t lost = curve_dealer(ctx, {impostor->public_key, *client_cert});
  lost.connect(server.endpoint);
  lost.send(zmq::str_buffer("ping"), zmq::send_flags::none);
  EXPECT_FALSE(poll_in(server.sock, std::chrono::milliseconds(500)));
  EXPECT_FALSE(poll_in(lost, std::chrono::milliseconds(1)));
}

TEST(CurveHandshake, TheMonitorSaysTheKeyWasRefused) {
  zmq::context_t ctx(1);
  zap_handler zap(ctx, 400);
  auto server_cert = curve_cert_generate("broker");
  auto client_cert = curve_cert_generate("client");
  ASSERT_TRUE(server_cert && client_cert);
  curve_server server(ctx, *server_cert);
  zmq::socket_t dealer = curve_dealer(ctx, {server_cert->public_key, *client_cert});
  handshake_monitor monitor(ctx, dealer);
  dealer.connect(server.endpoint);
  dealer.send(zmq::str_buffer("ping"), zmq::send_flags::none);
  ASSERT_TRUE(watch(monitor, [&] { return monitor.failure().has_value(); }));
  EXPECT_FALSE(monitor.succeeded());
  EXPECT_EQ(monitor.failure()->kind, handshake_failure_kind::auth);
  EXPECT_EQ(monitor.failure()->value, 400u);
  EXPECT_EQ(handshake_failure_text(*monitor.failure()), "ZAP status 400 (the key is not allowed)");
  EXPECT_FALSE(poll_in(server.sock, std::chrono::milliseconds(1)));
  EXPECT_TRUE(monitor.connected());
}

TEST(CurveHandshake, TheMonitorSeesNoConnectionWhereNothingListens) {
  zmq::context_t ctx(1);
  const std::string endpoint = "tcp://127.0.0.1:1";  // privileged: nothing of ours listens
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  handshake_monitor monitor(ctx, dealer);
  dealer.connect(endpoint);
  EXPECT_FALSE(watch(
      monitor, [&] { return monitor.connected(); }, std::chrono::milliseconds(300)));
  EXPECT_FALSE(monitor.succeeded());
  EXPECT_FALSE(monitor.failure().has_value());
}

TEST(CurveHandshake, TheMonitorSaysOneSideRunsNoCurve) {
  zmq::context_t ctx(1);
  zmq::socket_t plain(ctx, zmq::socket_type::router);
  plain.set(zmq::sockopt::linger, 0);
  plain.bind("tcp://127.0.0.1:*");
  auto server_cert = curve_cert_generate("broker");
  auto client_cert = curve_cert_generate("client");
  zmq::socket_t dealer = curve_dealer(ctx, {server_cert->public_key, *client_cert});
  handshake_monitor monitor(ctx, dealer);
  dealer.connect(plain.get(zmq::sockopt::last_endpoint));
  ASSERT_TRUE(watch(monitor, [&] { return monitor.failure().has_value(); }));
  EXPECT_TRUE(monitor.failure()->mechanism_mismatch());
  EXPECT_NE(handshake_failure_text(*monitor.failure()).find("one side runs CURVE"),
            std::string::npos);
}

}  // namespace
}  // namespace hearth::net
