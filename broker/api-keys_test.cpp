// API key secrets, hashes, names and the broker's in-memory registry of them.
#include "broker/api-keys.h"

#include <gtest/gtest.h>

#include <set>

namespace hearth::broker {
namespace {

bool base64url_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

TEST(ApiKeys, ASecretIsHkAnd43Base64urlCharactersAndNeverRepeats) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    const std::string s = api_key_secret_new();
    ASSERT_EQ(s.size(), 46u) << s;
    EXPECT_EQ(s.substr(0, 3), "hk_");
    for (char c : s.substr(3)) EXPECT_TRUE(base64url_char(c)) << s;
    // 32 bytes are 256 bits: the 43rd character carries 4 bits and two zero bits of padding.
    EXPECT_NE(std::string("AEIMQUYcgkosw048").find(s.back()), std::string::npos) << s;
    EXPECT_TRUE(seen.insert(s).second) << s;
  }
}

TEST(ApiKeys, TheHashIsSha256InHexAndTheIdItsFirst12Digits) {
  // FIPS 180-2's test vector.
  const std::string h = api_key_hash("abc");
  EXPECT_EQ(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(api_key_id_of(h), "ba7816bf8f01");
  EXPECT_EQ(api_key_owner("ba7816bf8f01"), "api:ba7816bf8f01");
  EXPECT_EQ(api_key_hash("").substr(0, 8), "e3b0c442");
}

TEST(ApiKeys, NamesAre1To64SafeCharacters) {
  EXPECT_EQ(api_key_name_check("ci"), "");
  EXPECT_EQ(api_key_name_check("Open-WebUI_2.laptop"), "");
  EXPECT_EQ(api_key_name_check(std::string(64, 'x')), "");
  const std::string rule =
      "an API key name is 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'";
  EXPECT_EQ(api_key_name_check(""), rule + "; the name is empty");
  EXPECT_EQ(api_key_name_check(std::string(65, 'x')), rule + "; the name has 65 bytes");
  EXPECT_EQ(api_key_name_check("a b"), rule + "; byte 2 is not one");
  EXPECT_EQ(api_key_name_check("ab/"), rule + "; byte 3 is not one");
  EXPECT_EQ(api_key_name_check("ünï"), rule + "; byte 1 is not one");
  EXPECT_EQ(api_key_name_check(std::string("a\0b", 3)), rule + "; byte 2 is not one");
}

api_key_record record(const std::string& secret, const std::string& name, int64_t created) {
  api_key_record r;
  r.hash = api_key_hash(secret);
  r.id = api_key_id_of(r.hash);
  r.name = name;
  r.prefix = secret.substr(0, api_key_prefix_chars);
  r.created_ms = created;
  return r;
}

TEST(ApiKeys, TheRegistryFindsKeysInForceBySecretAndAllKeysById) {
  api_key_registry reg;
  auto revoked = record("hk_old", "old", 1);
  revoked.revoked_ms = 5;
  reg.load({record("hk_one", "one", 10), record("hk_two", "two", 20), revoked});
  EXPECT_EQ(reg.in_force(), 2u);
  ASSERT_NE(reg.find_secret("hk_one"), nullptr);
  EXPECT_EQ(reg.find_secret("hk_one")->name, "one");
  EXPECT_EQ(reg.find_secret("hk_on"), nullptr);
  EXPECT_EQ(reg.find_secret("hk_old"), nullptr);  // revoked: no longer a key
  ASSERT_NE(reg.find_id(revoked.id), nullptr);    // ...but its jobs still show its name
  EXPECT_EQ(reg.find_id(revoked.id)->name, "old");
  EXPECT_EQ(reg.find_in_force("old"), nullptr);
  ASSERT_NE(reg.find_in_force("two"), nullptr);

  const std::string two = reg.find_in_force("two")->id;
  reg.revoke(two, 30);
  EXPECT_EQ(reg.find_secret("hk_two"), nullptr);
  EXPECT_EQ(reg.find_in_force("two"), nullptr);
  EXPECT_EQ(reg.find_id(two)->revoked_ms, 30);
  reg.revoke(two, 40);  // a second revocation changes nothing
  EXPECT_EQ(reg.find_id(two)->revoked_ms, 30);
  reg.add(record("hk_two2", "two", 50));  // the name is free again
  EXPECT_EQ(reg.find_secret("hk_two2")->name, "two");
  EXPECT_EQ(reg.in_force(), 2u);

  // In force newest first, then revoked by latest revocation.
  std::vector<std::string> names;
  for (const auto* k : reg.listing())
    names.push_back(k->name + "@" + std::to_string(k->revoked_ms));
  EXPECT_EQ(names, (std::vector<std::string>{"two@0", "one@0", "two@30", "old@5"}));
}

TEST(ApiKeys, LastUseIsWrittenAtMostOncePerInterval) {
  api_key_registry reg;
  const auto r = record("hk_one", "one", 10);
  reg.add(r);
  EXPECT_TRUE(reg.note_use(r.id, 1000));
  EXPECT_FALSE(reg.note_use(r.id, 1000 + api_key_used_interval_ms - 1));
  EXPECT_EQ(reg.find_id(r.id)->last_used_ms, 1000);
  EXPECT_TRUE(reg.note_use(r.id, 1000 + api_key_used_interval_ms));
  EXPECT_EQ(reg.find_id(r.id)->last_used_ms, 1000 + api_key_used_interval_ms);
  EXPECT_FALSE(reg.note_use("no-such-id", 5000));
}

}  // namespace
}  // namespace hearth::broker
