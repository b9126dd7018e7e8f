// The library backends/module-fixture.cpp's unresolvable module needs; built where no loader looks.
extern "C" __attribute__((visibility("default"))) int hearth_fixture_hidden_value() {
  return 1;
}
