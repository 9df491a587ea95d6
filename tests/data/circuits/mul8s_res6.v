// Written for lutcore's tests, in EvoApproxLib's header style.  The error figures were
// computed from the circuit's own table; the PDK45 figures are MADE UP for the tests
// (no synthesis was run): they only need to be plausible and ordered.
// MAE% = 0.046 %
// MAE = 30
// WCE% = 0.10 %
// WCE = 63
// WCRE% = 6300.00 %
// EP% = 93.75 %
// MRE% = 5.67 %
// MSE = 1253
// PDK45_PWR = 0.391 mW
// PDK45_AREA = 651.2 um2
// PDK45_DELAY = 1.41 ns
// The exact product with its 6 low result bits cleared (a result-truncated multiplier).
module mul8s_res6(A, B, O);
  input [7:0] A;
  input [7:0] B;
  output [15:0] O;
  wire signed [15:0] p = $signed(A) * $signed(B);
  assign O = {p[15:6], 6'b000000};
endmodule
