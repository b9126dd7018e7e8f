// A fixed delay on the packets a network namespace sends, for tests/lan-copy.sh on kernels without
// sch_netem (issue 54: "1 Gbit/s and 0.5 ms delay"; this project's Firecracker kernel has neither
// netem nor fq, so neither `tc netem` nor an eBPF program setting departure times that fq would
// honour can delay a packet there). Netfilter's queue holds each packet in the kernel (an nft rule
// `queue num Q` in the output hook); this program learns only each packet's id (NFQNL_COPY_META:
// no bytes are copied out, and GSO packets stay whole, NFQA_CFG_F_GSO) and accepts it DELAY_US
// after it was queued. The delay is constant, so the verdicts fall due in id order and one batch
// verdict (NFQNL_MSG_VERDICT_BATCH: every id up to N) releases all that are due.
//
//   netns_delay QUEUE DELAY_US      (inside the namespace; prints "delaying" once bound, then,
//                                    at SIGTERM/SIGINT, how many packets it held and how late)
//
// What a packet waits is DELAY_US plus this process's wake-ups (when the kernel queues it, and at
// its deadline): SCHED_FIFO and a 1 ns timer slack keep those to microseconds on an idle machine,
// and the stop line prints the lateness so that a busy machine shows (ping measures the whole).
// glibc's <netinet/in.h> before the kernel's headers: in that order they agree (libc-compat.h).
#include <arpa/inet.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <string>
#include <vector>

namespace {

volatile std::sig_atomic_t g_stop = 0;

int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// One netfilter-queue request: a netlink header, nfgenmsg (the queue number in res_id) and
// attributes, each padded to NLA_ALIGNTO as the kernel's parser expects.
class nfq_message {
 public:
  nfq_message(uint16_t type, uint16_t queue, uint16_t flags) {
    nlmsghdr h{};
    h.nlmsg_type = uint16_t((NFNL_SUBSYS_QUEUE << 8) | type);
    h.nlmsg_flags = uint16_t(NLM_F_REQUEST | flags);
    nfgenmsg g{};
    g.nfgen_family = AF_UNSPEC;
    g.version = NFNETLINK_V0;
    g.res_id = htons(queue);
    append(&h, sizeof h);
    append(&g, sizeof g);
  }
  template <class T>
  void attr(uint16_t type, const T& value) {
    nlattr a{};
    a.nla_type = type;
    a.nla_len = uint16_t(NLA_HDRLEN + sizeof value);
    append(&a, sizeof a);
    append(&value, sizeof value);
    bytes_.resize(NLA_ALIGN(bytes_.size()));
  }
  // Sends to the kernel; false with errno set when the socket refuses it.
  bool send(int fd) {
    reinterpret_cast<nlmsghdr*>(bytes_.data())->nlmsg_len = uint32_t(bytes_.size());
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    return sendto(fd, bytes_.data(), bytes_.size(), 0, reinterpret_cast<sockaddr*>(&kernel),
                  sizeof kernel) == ssize_t(bytes_.size());
  }

 private:
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const char*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  std::vector<char> bytes_;
};

// Waits for the kernel's answer to a request sent with NLM_F_ACK; an error is returned as text.
std::string await_ack(int fd) {
  alignas(nlmsghdr) char buf[8192];
  const ssize_t n = recv(fd, buf, sizeof buf, 0);
  if (n < 0) return std::string("recv: ") + std::strerror(errno);
  int len = int(n);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
    if (h->nlmsg_type != NLMSG_ERROR) continue;
    if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nlmsgerr))) return "a short netlink error message";
    const int err = static_cast<nlmsgerr*>(NLMSG_DATA(h))->error;
    return err == 0 ? "" : std::strerror(-err);
  }
  return "no acknowledgement from the kernel";
}

struct held {
  uint32_t id;
  int64_t due_ns;
};

// Appends each queued packet's id in `buf` to `pending`, due `delay_ns` after `at_ns`. Returns
// false (with the reason in `error`) on a netlink error message: a refused verdict or a queue
// the kernel dropped, after which held packets would never be released.
bool take_packets(const char* buf, int len, int64_t at_ns, int64_t delay_ns,
                  std::deque<held>& pending, std::string& error) {
  for (auto* h = reinterpret_cast<const nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      if (h->nlmsg_len >= NLMSG_LENGTH(sizeof *e) && e->error == 0) continue;
      error = h->nlmsg_len >= NLMSG_LENGTH(sizeof *e) ? std::strerror(-e->error) : "short error";
      return false;
    }
    if (h->nlmsg_type != ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET)) continue;
    const size_t head = NLMSG_LENGTH(sizeof(nfgenmsg));
    if (h->nlmsg_len < head) continue;
    const char* p = reinterpret_cast<const char*>(h) + NLMSG_ALIGN(head);
    const char* end = reinterpret_cast<const char*>(h) + h->nlmsg_len;
    while (end - p >= NLA_HDRLEN) {
      const auto* a = reinterpret_cast<const nlattr*>(p);
      if (a->nla_len < NLA_HDRLEN || a->nla_len > end - p) break;
      if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR &&
          a->nla_len >= NLA_HDRLEN + sizeof(nfqnl_msg_packet_hdr)) {
        nfqnl_msg_packet_hdr ph;
        std::memcpy(&ph, p + NLA_HDRLEN, sizeof ph);
        pending.push_back({ntohl(ph.packet_id), at_ns + delay_ns});
        break;
      }
      p += NLA_ALIGN(a->nla_len);
    }
  }
  return true;
}

int run(uint16_t queue, int64_t delay_ns) {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0) {
    std::fprintf(stderr, "netns_delay: netlink socket: %s\n", std::strerror(errno));
    return 1;
  }
  sockaddr_nl self{};
  self.nl_family = AF_NETLINK;
  if (bind(fd, reinterpret_cast<sockaddr*>(&self), sizeof self) != 0) {
    std::fprintf(stderr, "netns_delay: bind: %s\n", std::strerror(errno));
    return 1;
  }
  // A full socket buffer would make the kernel drop packets instead of queueing them to us.
  const int rcvbuf = 16 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);

  nfq_message bind_queue(NFQNL_MSG_CONFIG, queue, NLM_F_ACK);
  nfqnl_msg_config_cmd cmd{};
  cmd.command = NFQNL_CFG_CMD_BIND;
  cmd.pf = htons(AF_INET);
  bind_queue.attr(NFQA_CFG_CMD, cmd);
  std::string error = bind_queue.send(fd) ? await_ack(fd) : std::strerror(errno);
  if (!error.empty()) {
    std::fprintf(stderr, "netns_delay: binding queue %u: %s\n", unsigned(queue), error.c_str());
    return 1;
  }
  nfq_message params(NFQNL_MSG_CONFIG, queue, NLM_F_ACK);
  nfqnl_msg_config_params mode{};
  mode.copy_range = htonl(0);
  mode.copy_mode = NFQNL_COPY_META;
  params.attr(NFQA_CFG_PARAMS, mode);
  params.attr(NFQA_CFG_QUEUE_MAXLEN, htonl(65536));
  params.attr(NFQA_CFG_MASK, htonl(NFQA_CFG_F_GSO));
  params.attr(NFQA_CFG_FLAGS, htonl(NFQA_CFG_F_GSO));
  error = params.send(fd) ? await_ack(fd) : std::strerror(errno);
  if (!error.empty()) {
    std::fprintf(stderr, "netns_delay: configuring queue %u: %s\n", unsigned(queue), error.c_str());
    return 1;
  }

  // Best effort: without them the delay is still at least DELAY_US, only later by more.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  sched_param rt{};
  rt.sched_priority = 50;
  const bool realtime = sched_setscheduler(0, SCHED_FIFO, &rt) == 0;
  std::printf("delaying queue %u by %.3f ms%s\n", unsigned(queue), double(delay_ns) / 1e6,
              realtime ? "" : " (no SCHED_FIFO: wake-ups may be late)");
  std::fflush(stdout);

  sigset_t unblocked;
  sigemptyset(&unblocked);
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  sigprocmask(SIG_BLOCK, &blocked, nullptr);  // delivered only inside ppoll: no lost wake-up

  std::deque<held> pending;
  uint64_t packets = 0;
  int64_t late_sum_ns = 0, late_max_ns = 0;
  alignas(nlmsghdr) static char buf[1 << 20];
  while (!g_stop) {
    timespec wait{};
    timespec* timeout = nullptr;
    if (!pending.empty()) {
      const int64_t left = std::max<int64_t>(0, pending.front().due_ns - now_ns());
      wait.tv_sec = left / 1'000'000'000;
      wait.tv_nsec = left % 1'000'000'000;
      timeout = &wait;
    }
    pollfd p{fd, POLLIN, 0};
    if (ppoll(&p, 1, timeout, &unblocked) < 0 && errno != EINTR) {
      std::fprintf(stderr, "netns_delay: ppoll: %s\n", std::strerror(errno));
      return 1;
    }
    for (;;) {
      const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        // ENOBUFS: the kernel could not tell us of some packets; it dropped them (TCP resends).
        if (errno == ENOBUFS) continue;
        std::fprintf(stderr, "netns_delay: recv: %s\n", std::strerror(errno));
        return 1;
      }
      if (!take_packets(buf, int(n), now_ns(), delay_ns, pending, error)) {
        std::fprintf(stderr, "netns_delay: the kernel refused: %s\n", error.c_str());
        return 1;
      }
    }
    const int64_t now = now_ns();
    uint32_t last = 0;
    bool due = false;
    while (!pending.empty() && pending.front().due_ns <= now) {
      const int64_t late = now - pending.front().due_ns;
      late_sum_ns += late;
      late_max_ns = std::max(late_max_ns, late);
      last = pending.front().id;
      due = true;
      ++packets;
      pending.pop_front();
    }
    if (!due) continue;
    nfq_message verdict(NFQNL_MSG_VERDICT_BATCH, queue, 0);
    nfqnl_msg_verdict_hdr v{htonl(NF_ACCEPT), htonl(last)};
    verdict.attr(NFQA_VERDICT_HDR, v);
    if (!verdict.send(fd)) {
      std::fprintf(stderr, "netns_delay: verdict: %s\n", std::strerror(errno));
      return 1;
    }
  }
  // Its CPU time shows what the delay line takes from the measured programs on a small machine.
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const double cpu = double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
                     double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  std::printf(
      "netns_delay: queue %u held %llu packets %.3f ms each, late by %.1f us on average "
      "(at most %.1f us); CPU %.3f s\n",
      unsigned(queue), (unsigned long long)packets, double(delay_ns) / 1e6,
      packets ? double(late_sum_ns) / double(packets) / 1e3 : 0.0, double(late_max_ns) / 1e3, cpu);
  close(fd);  // the kernel drops what is still queued: nothing is sent undelayed
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  std::signal(SIGINT, [](int) { g_stop = 1; });
  char* end = nullptr;
  const long queue = argc == 3 ? std::strtol(argv[1], &end, 10) : -1;
  const bool queue_ok = end && *end == 0 && queue >= 0 && queue <= 65535;
  const long delay_us = argc == 3 ? std::strtol(argv[2], &end, 10) : -1;
  if (!queue_ok || *end != 0 || delay_us < 0 || delay_us > 10'000'000) {
    std::fprintf(stderr, "usage: netns_delay QUEUE(0-65535) DELAY_US(0-10000000)\n");
    return 2;
  }
  return run(uint16_t(queue), int64_t(delay_us) * 1000);
}
