#include "broker/peer-connection.h"

#include <sys/socket.h>
#include <sys/stat.h>

namespace hearth::broker {
namespace {

ino_t socket_inode(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return st.st_ino;
}

}  // namespace

peer_connection peer_connection_of(zmq::message_t& frame) {
  peer_connection c;
  c.fd = zmq_msg_get(frame.handle(), ZMQ_SRCFD);
  if (c.fd < 0) return {};
  c.inode = socket_inode(c.fd);
  if (c.inode == 0) return {};
  return c;
}

bool peer_connection_close(const peer_connection& c) {
  if (c.fd < 0 || socket_inode(c.fd) != c.inode) return false;
  return shutdown(c.fd, SHUT_RDWR) == 0;
}

}  // namespace hearth::broker
