// A non-owning reference to a callable: what std::function would be without the copy. The
// thread pool takes these, so dispatching an op with a lambda that captures a dozen locals by
// reference allocates nothing (std::function heap-allocates closures larger than two pointers,
// which would be several allocations per generated token). The callable must outlive the call.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace hearth {

template <typename Signature>
class function_ref;

template <typename R, typename... Args>
class function_ref<R(Args...)> {
 public:
  template <typename F,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, function_ref> &&
                                        std::is_invocable_r_v<R, F&, Args...>>>
  function_ref(F&& f)  // NOLINT(google-explicit-constructor): binds like std::function does
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace hearth
