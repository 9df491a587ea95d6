// Written for lutcore's tests, in EvoApproxLib's header style.  The error figures were
// computed from the circuit's own table; the PDK45 figures are MADE UP for the tests
// (no synthesis was run): they only need to be plausible and ordered.
// MAE% = 0.000 %
// MAE = 0
// WCE% = 0.00 %
// WCE = 0
// WCRE% = 0.00 %
// EP% = 0.00 %
// MRE% = 0.00 %
// MSE = 0
// PDK45_PWR = 0.425 mW
// PDK45_AREA = 709.9 um2
// PDK45_DELAY = 1.43 ns
module mul8s_exact(A, B, O);
  input [7:0] A;
  input [7:0] B;
  output [15:0] O;
  assign O = $signed(A) * $signed(B);
endmodule
