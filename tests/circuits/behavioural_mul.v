// A behavioural signed multiplier: Yosys maps the * itself.
module bmul(input signed [7:0] x, input signed [7:0] y, output signed [15:0] product);
  assign product = x * y;
endmodule
