// Who may talk to the broker: the folder given by `hearth-broker --auth DIR`.
//
//   DIR/broker.key     the broker's own secret certificate (hearth keygen broker --dir DIR)
//   DIR/nodes/*.pub    public certificates of nodes
//   DIR/clients/*.pub  ... of clients (submit, and see, watch and cancel their own jobs)
//   DIR/admins/*.pub   ... of admins (everything a client may, for every job; forget nodes)
//
// The folder a certificate is in is its key's role. Certificates added or removed take effect
// without a restart: refresh() rescans the three folders (the broker calls it every second),
// refresh_if_changed() when a folder changed (the broker asks every 100 ms, and when an unknown
// key knocks). generation() tells the broker that keys went or changed role, so that it stops
// serving their connections. A key in two folders has no role: which one was
// meant is unknown, so it is refused and logged. Files that are not valid certificates are skipped
// with one warning.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "schema/curve-cert.h"

namespace hearth::broker {

enum class peer_role : uint8_t { node, client, admin };
std::string_view peer_role_name(peer_role r);

// One allowed key: its role and the certificate's file name without ".pub" (shown as the owner
// of jobs and in logs; the key itself is the identity).
struct allowed_key {
  peer_role role = peer_role::client;
  std::string name;
};

class allow_list {
 public:
  // Reads DIR/broker.key (required: a secret certificate) and the three folders (each optional;
  // a missing folder allows nobody of that role). Errors name the file and what is wrong.
  static result<allow_list> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const net::curve_cert& broker_cert() const { return broker_; }

  // Rescans the folders; returns the number of keys now allowed.
  size_t refresh();
  // Rescans only when a folder changed (a certificate added, removed or renamed): a few stat()
  // calls otherwise, so an unknown key knocking costs no file reads.
  void refresh_if_changed();
  // The role of a Z85 public key, or nullopt when it is not allowed (now).
  const allowed_key* find(std::string_view z85_public) const;
  size_t size() const { return keys_.size(); }
  // Counts the rescans that removed a key or changed one's role.
  uint64_t generation() const { return generation_; }

 private:
  std::string dir_;
  net::curve_cert broker_;
  std::map<std::string, allowed_key, std::less<>> keys_;  // by Z85 public key
  std::map<std::string, std::string> warned_;             // file -> problem already logged
  std::string stamp_;  // the folders' modification times at the last rescan
  uint64_t generation_ = 0;
};

// Whether `endpoint` can only be reached from this machine: tcp on 127.0.0.0/8, ::1 or
// "localhost", ipc:// and inproc://. A broker bound anywhere else needs --auth or --insecure.
bool endpoint_is_loopback(std::string_view endpoint);

}  // namespace hearth::broker
