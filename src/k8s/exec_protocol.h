// The pod exec protocol without the socket (docs/wire-protocols.md "D. Kubernetes pod exec"):
// the request target, the channel framing of the WebSocket messages in both directions, the v5
// close signal, and the exit status on channel 3. Pure functions, unit-tested; the WebSocket client
// uses them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ci::k8s {

// What both subprotocols share; v5 adds the close signal (stdin can be half-closed).
inline constexpr std::string_view kProtocolV5 = "v5.channel.k8s.io";
inline constexpr std::string_view kProtocolV4 = "v4.channel.k8s.io";
// Offered in this order: v5 where the API server translates (1.30+), v4 from the node otherwise.
inline constexpr std::string_view kOfferedProtocols = "v5.channel.k8s.io, v4.channel.k8s.io";

enum class Channel : uint8_t { kStdin = 0, kStdout = 1, kStderr = 2, kError = 3, kResize = 4 };
inline constexpr uint8_t kCloseSignal = 255;  // v5, client to server: [255, channel]
// One stdin message at most this big (the API server relays messages whole).
inline constexpr size_t kStdinMessageMax = 64 << 10;

struct ExecTarget {
  std::string namespace_;
  std::string pod;
  std::string container;
  std::vector<std::string> command;  // argv, no shell
  bool stdin = false;
};

// "/api/v1/namespaces/NS/pods/POD/exec?container=C&command=a&command=b&stdin=true&stdout=true&
// stderr=true&tty=false", every value percent-encoded (an argv element may hold any byte).
std::string ExecRequestTarget(const ExecTarget& t);

// "/api/v1/namespaces/NS/pods/POD/attach?container=C&stdin=true&stdout=true&stderr=true&
// tty=false": the container's PID 1's stdio (the agent's, k8s/attach_transport.h).
std::string AttachRequestTarget(std::string_view namespace_, std::string_view pod,
                                std::string_view container);

// One WebSocket message to the server: [channel][payload].
std::string StdinMessage(std::string_view data);
// v5 only: stdin is closed (EOF for the command); other channels keep flowing.
std::string CloseStdinMessage();

struct ChannelMessage {
  uint8_t channel = 0;
  std::string_view payload;
};
// nullopt for an empty message (no channel byte): a protocol error.
std::optional<ChannelMessage> ParseChannelMessage(std::string_view message);

// How the command ended, from the metav1.Status JSON on channel 3: Success -> 0, Failure with
// reason NonZeroExitCode -> the ExitCode cause (0-255). Any other Failure is the infrastructure's
// (binary not found, container gone): an error with the Status's message.
Result<int> ExitCodeFromStatus(std::string_view status_json);

}  // namespace ci::k8s
